-- Tracing: the W3C traceparent the event arrived with, so every attempt of its delivery continues
-- the trace of the call that caused it and hands it to the receiver (null when tracing is off).
ALTER TABLE deliveries ADD COLUMN traceparent text;
