-- Tracing: the W3C traceparent of the call that wrote an event or queued a delivery, so the
-- relay and the push worker continue its trace (null when tracing is off).
ALTER TABLE outbox ADD COLUMN traceparent text;
ALTER TABLE deliveries ADD COLUMN traceparent text;
