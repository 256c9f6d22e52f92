package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrationFiles holds the schema as numbered steps, NNNN_what.sql. A
// released step is never edited: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one schema step; applying it takes the schema from
// version-1 to version.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded steps in order. Versions must run 1, 2,
// 3… without gaps, or a database could skip a step.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	ms := make([]migration, 0, len(entries))
	for i, e := range entries { // ReadDir sorts by name
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d first in its name", e.Name(), i+1)
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	return ms, nil
}

// LatestVersion is the schema version this build migrates to.
func LatestVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrateLock is the advisory lock key, with the schema's name, under
// which replicas starting together migrate one at a time.
const migrateLock = "kerneld migrate "

// versionTableSQL creates the table that records the steps applied.
const versionTableSQL = `CREATE TABLE IF NOT EXISTS kerneld_schema (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// schemaVersion returns the version of the schema, 0 for one without
// kerneld's tables.
func schemaVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('kerneld_schema') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM kerneld_schema`).Scan(&v)
	return v, err
}

// migrate brings the schema up to this build's version, one transaction
// per step, holding a session advisory lock on one connection so that
// replicas starting together do not race. It refuses a schema newer than
// this build knows, changing nothing.
func (s *Store) migrate(ctx context.Context) (err error) {
	ms, err := migrations()
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate postgres schema: %w", unavailable(ctx, err))
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&s.schema); err != nil {
		return fmt.Errorf("migrate postgres schema: %w", unavailable(ctx, err))
	}
	if s.schema == "" {
		return fmt.Errorf("migrate postgres schema: the search_path names no schema that exists")
	}
	key := migrateLock + s.schema
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, key); err != nil {
		return fmt.Errorf("migrate postgres schema: lock: %w", unavailable(ctx, err))
	}
	defer func() {
		// Unlocked with the connection's end if this fails.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, key)
	}()
	return s.applyMigrations(ctx, conn.Conn(), ms)
}

// applyMigrations applies the steps of ms the schema lacks. A schema
// already at this build's version is only read, so kerneld also starts on
// a read-only standby (and answers its writes 503).
func (s *Store) applyMigrations(ctx context.Context, conn *pgx.Conn, ms []migration) error {
	current, err := schemaVersion(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate postgres schema: read version: %w", unavailable(ctx, err))
	}
	if current > len(ms) {
		return fmt.Errorf("postgres schema %q is at version %d, newer than this kerneld knows (%d): "+
			"run a newer kerneld", s.schema, current, len(ms))
	}
	if current == len(ms) {
		return nil
	}
	if _, err := conn.Exec(ctx, versionTableSQL); err != nil {
		return fmt.Errorf("migrate postgres schema: %w", unavailable(ctx, err))
	}
	for _, m := range ms[current:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO kerneld_schema (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate postgres schema: %s: %w", m.name, unavailable(ctx, err))
		}
		s.log.Info("migrated postgres schema", "schema", s.schema, "version", m.version)
	}
	return nil
}
