-- Only the head of a webhook's queue (its pending delivery with the lowest seq) may be sent. This
-- index holds just the pending rows, so finding a webhook's head, or the next webhook with
-- pending work, is one probe however much delivered history the table keeps.
CREATE INDEX deliveries_pending_idx ON deliveries (webhook_id, seq) WHERE status = 'pending';
-- Due times are read only on heads, found through deliveries_pending_idx.
DROP INDEX deliveries_due_idx;
-- The worker sweeps retired webhooks whenever it runs out of work; this keeps that to the few.
CREATE INDEX webhooks_retired_idx ON webhooks (id) WHERE workspace_deleted_at IS NOT NULL;
