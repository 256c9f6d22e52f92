package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync"
)

// checkpointEvery is how many appended events make the writer ask for a
// checkpoint: about as many WAL pages, since concurrent sessions' events
// land on different pages.
const checkpointEvery = 2000

// checkpointer copies committed WAL pages back into the database file on a
// connection and goroutine of its own, so the event writer does not stop
// for it: on 2 cores that was worth 10-15% of single-event append
// throughput across sessions and a third for 16-event appends.
// The writer's own autocheckpoint stays on at a higher mark as a backstop
// that bounds the WAL: a checkpoint running beside a busy writer never
// quite catches up, and only a caught-up WAL starts over from the top.
type checkpointer struct {
	db    *sql.DB
	kick  chan struct{} // buffered: a kick while one runs is remembered once
	wg    sync.WaitGroup
	since int64 // events appended since the last kick; the writer's
}

// open prepares the checkpointer's connection, which opens at the first
// checkpoint: a store that has not written much holds none (the writer's
// connection has shown that the file opens).
func (c *checkpointer) open(path string) error {
	db, err := sql.Open("sqlite", dsn(path, url.Values{"_pragma": {"busy_timeout(5000)"}}))
	if err != nil {
		return fmt.Errorf("open database %s for checkpoints: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	c.db, c.kick = db, make(chan struct{}, 1)
	return nil
}

func (c *checkpointer) start() { c.wg.Go(c.run) }

// run checkpoints each time it is kicked, until kick is closed. PASSIVE
// waits for neither the writer nor readers; what it cannot copy now, the
// next one will, and a failure now is retried then, so errors are dropped.
func (c *checkpointer) run() {
	for range c.kick {
		_, _ = c.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
	}
}

// appended is called by the writer after each commit of n events.
func (c *checkpointer) appended(n int64) {
	c.since += n
	if c.since < checkpointEvery {
		return
	}
	c.since = 0
	select {
	case c.kick <- struct{}{}:
	default: // one is pending already
	}
}

// stop waits for a running checkpoint and closes the connection.
func (c *checkpointer) stop() error {
	close(c.kick)
	c.wg.Wait()
	return c.db.Close()
}
