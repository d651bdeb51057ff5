-- The tasks-in-flight quota is checked inside the grouped insert of new tasks (send-batch.ts), so
-- that concurrent sends of one sender cannot pass it together. This function first takes a
-- transaction-scoped lock per sender (held until the insert commits, on every replica alike),
-- then counts: being VOLATILE, its count runs in a snapshot taken after the lock, which sees the
-- tasks of the sender's previous insert, committed before that lock was released. Returns how
-- many more tasks the sender may have submitted or working (0 at or past its quota).
CREATE FUNCTION tasks_in_flight_room(sender text, quota integer) RETURNS integer
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
  held integer;
BEGIN
  -- Two-key form: a lock space of its own, apart from the single-key locks (migrations, relay).
  PERFORM pg_advisory_xact_lock(1836279649, hashtext(sender));
  SELECT count(*) INTO held FROM (
    SELECT 1 FROM tasks WHERE sender_agent_id = sender AND state IN ('submitted', 'working') LIMIT quota
  ) AS in_flight;
  RETURN greatest(quota - held, 0);
END
$$;
