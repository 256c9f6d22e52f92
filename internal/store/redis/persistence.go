package redis

import (
	"context"
	"fmt"
)

// PersistenceWarning returns what kerneld should warn about at start when
// events Redis acknowledges would not survive a Redis restart, or "" when
// they would. It reads appendonly and appendfsync with CONFIG GET; a
// managed Redis that disables CONFIG gets a warning that says the check
// could not be made.
func (s *Store) PersistenceWarning(ctx context.Context) string {
	aof, err := s.configValue(ctx, "appendonly")
	var fsync string
	if err == nil {
		fsync, err = s.configValue(ctx, "appendfsync")
	}
	return persistenceWarning(aof, fsync, err)
}

// persistenceWarning judges the settings appendonly and appendfsync, or
// the error reading them:
//
//   - appendonly no: Redis keeps no append-only file, so a restart loses
//     everything written since the last snapshot, if there is one;
//   - appendonly yes with appendfsync no: a restart of Redis keeps every
//     acknowledged write, but a crash of its host may lose up to about
//     30 seconds of them, as the OS flushes when it likes.
//
// appendfsync everysec (Redis' default with appendonly) or always get no
// warning.
func persistenceWarning(aof, fsync string, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("could not check Redis persistence (%v): acknowledged events survive a Redis restart only with appendonly yes", err)
	case aof != "yes":
		return fmt.Sprintf("Redis runs with appendonly %s: acknowledged events and sessions are lost when Redis restarts; set appendonly yes", aof)
	case fsync == "no":
		return "Redis runs with appendfsync no: a crash of Redis' host (not of Redis alone) may lose about 30 seconds of acknowledged events; set appendfsync everysec"
	}
	return ""
}

// configValue returns the value of one Redis configuration parameter.
func (s *Store) configValue(ctx context.Context, name string) (string, error) {
	m, err := s.rdb.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET %s: %w", name, err)
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter", name)
	}
	return v, nil
}
