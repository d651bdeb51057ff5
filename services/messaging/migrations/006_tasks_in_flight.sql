-- The tasks-in-flight quota counts a sender's submitted and working tasks on every send: this index
-- holds only those, so the count stays small however many finished tasks an agent has.
CREATE INDEX tasks_sender_in_flight_idx ON tasks (sender_agent_id) WHERE state IN ('submitted', 'working');
