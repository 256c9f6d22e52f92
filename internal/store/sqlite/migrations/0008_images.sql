-- 0008: images users send with their messages.
--
-- An image's bytes are kept once per tenant and SHA-256 (images); each
-- session that refers to one has a row in image_refs, which goes with the
-- session (ON DELETE CASCADE). When the last reference to an image goes,
-- the trigger deletes the image, so a tenant's images are always the
-- ones its sessions still show.
--
-- images is a rowid table, its blob the last column: SQLite reads the
-- overflow pages of a large value only when the query asks for it, and
-- summing a tenant's sizes reads images_usage alone.
CREATE TABLE images (
	tenant     TEXT    NOT NULL,
	hash       TEXT    NOT NULL,  -- 64 lowercase hex digits
	media_type TEXT    NOT NULL,
	size       INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	data       BLOB    NOT NULL
) STRICT;

CREATE UNIQUE INDEX images_by_hash ON images (tenant, hash);
CREATE INDEX images_usage ON images (tenant, size);

CREATE TABLE image_refs (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	tenant     TEXT NOT NULL,
	hash       TEXT NOT NULL,
	PRIMARY KEY (session_id, hash)
) STRICT, WITHOUT ROWID;

CREATE INDEX image_refs_by_image ON image_refs (tenant, hash);

CREATE TRIGGER image_refs_last AFTER DELETE ON image_refs
WHEN NOT EXISTS (SELECT 1 FROM image_refs WHERE tenant = old.tenant AND hash = old.hash)
BEGIN
	DELETE FROM images WHERE tenant = old.tenant AND hash = old.hash;
END;

-- A message's images: a JSON array of {hash, media_type} or {url,
-- media_type}; NULL for none.
ALTER TABLE messages ADD COLUMN images TEXT;
