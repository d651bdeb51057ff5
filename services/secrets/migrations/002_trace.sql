-- Tracing: the W3C traceparent of the call that wrote an event, so the relay carries it onto the
-- event log (null when tracing is off). OUTBOX_TABLE_SQL's shape.
ALTER TABLE outbox ADD COLUMN traceparent text;
