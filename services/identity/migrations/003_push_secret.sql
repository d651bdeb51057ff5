-- The push secret the hub presents to a push agent's endpoint (`Authorization: Bearer …`). The
-- hub must send it, so it cannot be stored hashed like an API key; it is readable only by the
-- identity service's role, never logged, and returned only at creation, at rotation and to the
-- push worker. Agents registered before have none until the operator rotates one in.
ALTER TABLE agents ADD COLUMN push_secret text;
