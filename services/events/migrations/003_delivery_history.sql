-- Finished deliveries are pruned once older than the history window (EventsLimits.historyMs):
-- this index keeps that lookup cheap however large the table grows.
CREATE INDEX deliveries_finished_idx ON deliveries (created_at) WHERE status <> 'pending';
