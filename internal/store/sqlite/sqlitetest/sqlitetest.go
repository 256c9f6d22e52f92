// Package sqlitetest damages kerneld's SQLite databases the way storage
// failures do, for tests of how kerneld reports them.
package sqlitetest

import (
	"database/sql"
	"errors"
	"os"
	"testing"

	_ "modernc.org/sqlite" // the driver the store uses
)

// ZeroInteriorPage zeroes the first interior b-tree page of the named
// table or index of the closed database at path, as a lost or torn write
// leaves it. The table or index must be large enough to have one.
func ZeroInteriorPage(tb testing.TB, path, name string) {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		tb.Fatal(err)
	}
	var page, size int64
	err = db.QueryRowContext(tb.Context(), `SELECT pageno, (SELECT page_size FROM pragma_page_size)
		FROM dbstat WHERE name = ? AND pagetype = 'internal' ORDER BY pageno LIMIT 1`, name).Scan(&page, &size)
	_ = db.Close() // read-only
	if err != nil {
		tb.Fatalf("find an interior page of %s: %v", name, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, size), (page-1)*size)
	if err := errors.Join(err, f.Close()); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("zeroed page %d of %s (%d bytes a page)", page, name, size)
}
