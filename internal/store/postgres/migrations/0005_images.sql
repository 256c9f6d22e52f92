-- 0005: images users send with their messages, as the SQLite store keeps
-- them (its 0008). Messages hold their image refs since 0001.
--
-- An image's bytes are kept once per tenant and SHA-256 (images); each
-- session that refers to one has a row in image_refs, which goes with the
-- session (ON DELETE CASCADE). When the last reference to an image goes,
-- the trigger deletes the image, so a tenant's images are always the
-- ones its sessions still show. PutImage and the trigger take the
-- tenant's advisory lock, so a reference added while the last other one
-- goes cannot be left without its bytes, nor two new images both take a
-- tenant's last bytes.
CREATE TABLE images (
	tenant     text COLLATE "C" NOT NULL,
	hash       text COLLATE "C" NOT NULL,  -- 64 lowercase hex digits
	media_type text   NOT NULL,
	size       bigint NOT NULL,
	created_at bigint NOT NULL,
	data       bytea  NOT NULL,
	PRIMARY KEY (tenant, hash)
);

CREATE TABLE image_refs (
	session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	tenant     text COLLATE "C" NOT NULL,
	hash       text COLLATE "C" NOT NULL,
	PRIMARY KEY (session_id, hash)
);

CREATE INDEX image_refs_by_image ON image_refs (tenant, hash);

CREATE FUNCTION kerneld_image_refs_last() RETURNS trigger
	LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('kerneld images ' || old.tenant));
	DELETE FROM images i WHERE i.tenant = old.tenant AND i.hash = old.hash
		AND NOT EXISTS (SELECT 1 FROM image_refs r WHERE r.tenant = old.tenant AND r.hash = old.hash);
	RETURN NULL;
END
$$;

CREATE TRIGGER image_refs_last AFTER DELETE ON image_refs
	FOR EACH ROW EXECUTE FUNCTION kerneld_image_refs_last();
