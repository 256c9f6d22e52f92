-- 0007: the agent that wrote each assistant message, for sessions on
-- which several agents take turns ('' for other roles and older rows),
-- as the SQLite store keeps it (its 0011).
ALTER TABLE messages ADD COLUMN agent text NOT NULL DEFAULT '';
