-- A child session records how it got its memory: 'none' or 'copy' (of its
-- parent's at creation); '' for a top-level session.
ALTER TABLE sessions ADD COLUMN inherit_memory TEXT NOT NULL DEFAULT '';
