package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kerneld/kerneld/internal/transfer"
)

const transferUsage = `Usage: kerneld export [store flags] [--output FILE] > dump.jsonl
       kerneld import [store flags] [--input FILE] [--overwrite] [--resume] < dump.jsonl
       kerneld import [store flags] [--input FILE] --verify < dump.jsonl

export writes every tenant's sessions, with their runs, messages, memory,
images, schedules and events, as JSON lines (docs/transfer.md); import
writes such a dump into the store the flags choose, seq for seq. The store
flags, their KERNELD_* twins and the config file choose the store as they
do for the server; stop the server that uses a SQLite directory first.

import refuses a session the store has already, unless --overwrite. An
import that stopped part-way (dump cut short, store down, killed) is
finished by running it again with the whole dump and --resume. --verify
writes nothing: it compares the store with the dump, session by session
(counts and a SHA-256 of each session's contents), and fails if any differ.

Flags:
`

// transferFlags are the flags of export and import.
type transferFlags struct {
	store                         flagValues
	file                          string // --output of export, --input of import
	overwrite, resume, verifyOnly bool
}

// parseTransferFlags parses the flags of export or import: the server's
// store flags, with the same environment twins, and the command's own.
func parseTransferFlags(name string, args []string, getenv func(string) string, stderr io.Writer) (transferFlags, error) {
	var f transferFlags
	fs := flag.NewFlagSet("kerneld "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), transferUsage) // help text: nothing to do if stderr fails
		fs.PrintDefaults()
	}
	fs.StringVar(&f.store.config, "config", envOr(getenv, "KERNELD_CONFIG", "configs/kerneld.yaml"), "config file (KERNELD_CONFIG)")
	fs.StringVar(&f.store.store, "store", getenv("KERNELD_STORE"), "storage backend: sqlite (default), memory, redis or postgres (KERNELD_STORE)")
	fs.StringVar(&f.store.dataDir, "data-dir", getenv("KERNELD_DATA_DIR"), "data directory of --store sqlite, default ./data (KERNELD_DATA_DIR)")
	fs.StringVar(&f.store.redisURL, "redis-url", getenv("KERNELD_REDIS_URL"), "the Redis server of --store redis (KERNELD_REDIS_URL)")
	fs.StringVar(&f.store.postgresURL, "postgres-url", getenv("KERNELD_POSTGRES_URL"), "the database of --store postgres (KERNELD_POSTGRES_URL)")
	if name == "export" {
		fs.StringVar(&f.file, "output", "-", "write the dump to this file; - is standard output")
	} else {
		fs.StringVar(&f.file, "input", "-", "read the dump from this file; - is standard input")
		fs.BoolVar(&f.overwrite, "overwrite", false, "replace sessions the store has already")
		fs.BoolVar(&f.resume, "resume", false, "skip the sessions an earlier import of this dump finished")
		fs.BoolVar(&f.verifyOnly, "verify", false, "write nothing; compare the store with the dump")
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q (kerneld %s --help lists the flags)", fs.Arg(0), name)
	}
	return f, nil
}

// transferMain runs "kerneld export" or "kerneld import".
func transferMain(ctx context.Context, name string, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseTransferFlags(name, args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	cfg, err := loadConfig(f.store, getenv)
	if err != nil {
		return err
	}
	if err := requireDatabase(name, cfg.Store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := openStore(ctx, cfg.Store, newLogger(quieter(cfg.Log), stderr, false).With("system", "store"))
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // a failed close loses nothing the command wrote: writes are acknowledged
	if name == "export" {
		return exportTo(ctx, db, cfg.Store.Kind, f.file, stdout, stderr)
	}
	in, closeIn, err := openInput(f.file, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	if f.verifyOnly {
		return verifyDump(ctx, db, in, stdout)
	}
	sum, err := transfer.Import(ctx, db, in, transfer.ImportOptions{Overwrite: f.overwrite, Resume: f.resume,
		Holder: "kerneld-import-" + replicaName()})
	if err != nil {
		return fmt.Errorf("import (%d sessions written before the error): %w", sum.Sessions, err)
	}
	_, err = fmt.Fprintf(stderr, "imported %d sessions (%d skipped: imported before): %s\n",
		sum.Sessions, sum.Skipped, countsText(sum.Counts))
	return err
}

// requireDatabase refuses to export a SQLite database that is not there:
// opening it would create an empty one, and a mistyped --data-dir would
// export nothing without a word.
func requireDatabase(name string, c StoreConfig) error {
	if name != "export" || (c.Kind != "sqlite" && c.Kind != "") {
		return nil
	}
	if _, err := os.Stat(databasePath(c)); err != nil {
		return fmt.Errorf("export: no database to export: %w", err)
	}
	return nil
}

// quieter is c at level warn at least: the store's routine messages
// (opened, migrated, closed) would bury the command's own output.
func quieter(c LogConfig) LogConfig {
	if c.Level == "debug" || c.Level == "info" || c.Level == "" {
		c.Level = "warn"
	}
	return c
}

// exportTo writes the dump of db to file, or to stdout for "-".
func exportTo(ctx context.Context, db transfer.Source, kind, file string, stdout, stderr io.Writer) error {
	out := stdout
	var f *os.File
	if file != "-" {
		var err error
		if f, err = os.Create(file); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		out = f
	}
	sum, err := transfer.Export(ctx, db, out, transfer.ExportOptions{Source: kind})
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	_, err = fmt.Fprintf(stderr, "exported %d sessions: %s\n", sum.Sessions, countsText(sum.Counts))
	return err
}

// openInput opens file, or stdin for "-".
func openInput(file string, stdin io.Reader) (io.Reader, func(), error) {
	if file == "-" {
		return stdin, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("import: %w", err)
	}
	return f, func() { _ = f.Close() }, nil // read only
}

// verifyDump prints each session of the dump that the store holds
// otherwise, and fails if there is one.
func verifyDump(ctx context.Context, db transfer.Source, in io.Reader, stdout io.Writer) error {
	rep, err := transfer.Verify(ctx, db, in)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, m := range rep.Mismatches {
		if _, err := fmt.Fprintf(stdout, "session %s: %s\n", m.SessionID, m.Problem); err != nil {
			return err
		}
	}
	if n := len(rep.Mismatches); n > 0 {
		return fmt.Errorf("verify: %d of %d sessions differ from the dump", n, rep.Sessions)
	}
	_, err = fmt.Fprintf(stdout, "verified %d sessions: the store holds them as the dump does (%s)\n",
		rep.Sessions, countsText(rep.Counts))
	return err
}

func countsText(c transfer.Counts) string {
	return fmt.Sprintf("%d runs, %d messages, %d memory entries, %d images, %d schedules, %d events",
		c.Runs, c.Messages, c.Memory, c.Images, c.Schedules, c.Events)
}
