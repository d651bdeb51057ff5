-- What an agent's A2A Agent Card advertises beyond its name: a description and its skills
-- (a JSON array of {id, name, description, tags}). Agents registered before have neither.
ALTER TABLE agents ADD COLUMN description text NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN skills jsonb NOT NULL DEFAULT '[]';
