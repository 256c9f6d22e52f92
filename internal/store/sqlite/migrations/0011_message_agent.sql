-- 0011: the agent that wrote each assistant message, for sessions on
-- which several agents take turns ('' for other roles and older rows).
ALTER TABLE messages ADD COLUMN agent TEXT NOT NULL DEFAULT '';
