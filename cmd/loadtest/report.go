package main

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// kind says how a metric's value is printed.
type kind int

const (
	kindRate     kind = iota // a count per second
	kindDuration             // nanoseconds
	kindBytes
	kindCount
	kindRatio // a quotient of two counts, to two decimals
)

// rowKey names one row of the table.
type rowKey struct{ metric, store string }

// results collects every measurement by row and build. Rows are printed
// by metric, in the order metrics were first measured, then by store. With
// -count above one a cell is the median of its samples.
type results struct {
	mu      sync.Mutex
	builds  []string
	metrics []string // in the order first measured
	stores  []string // likewise
	kinds   map[rowKey]kind
	samples map[rowKey][][]float64 // by build index
	notes   []string               // problems: the run fails if there are any
	remarks []string               // what else the reader must know

	measured  time.Duration // the workloads' wall time, summed
	cpuUsed   time.Duration // the servers' CPU time during it
	cpuWait   time.Duration // their threads' runnable time without a CPU during it
	clientCPU time.Duration // the load generator's CPU time during it
}

func newResults(builds []string) *results {
	return &results{builds: builds, kinds: make(map[rowKey]kind), samples: make(map[rowKey][][]float64)}
}

// add records one value of metric for store and build b.
func (r *results) add(metric string, k kind, store string, b int, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := rowKey{metric, store}
	if _, ok := r.kinds[key]; !ok {
		if !slices.Contains(r.metrics, metric) {
			r.metrics = append(r.metrics, metric)
		}
		if !slices.Contains(r.stores, store) {
			r.stores = append(r.stores, store)
		}
		r.kinds[key] = k
		r.samples[key] = make([][]float64, len(r.builds))
	}
	r.samples[key][b] = append(r.samples[key][b], v)
}

// note records a problem the reader of the table must know, such as a
// workload that failed.
func (r *results) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// remark records something else the reader must know, such as a row left
// empty and why; a remark made before is not repeated.
func (r *results) remark(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := fmt.Sprintf(format, args...); !slices.Contains(r.remarks, n) {
		r.remarks = append(r.remarks, n)
	}
}

// time records a workload's wall time, the server's CPU time during it,
// how long its threads waited for a CPU, and the load generator's CPU time.
func (r *results) time(wall, used, wait, client time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.measured += wall
	r.cpuUsed += used
	r.cpuWait += wait
	r.clientCPU += client
}

// cell returns the median of a row's samples for build b.
func (r *results) cell(key rowKey, b int) (float64, bool) {
	s := slices.Clone(r.samples[key][b])
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	return percentile(s, 50), true
}

// writeTable writes the results as one Markdown table: a row per metric
// and store, a column per build, and the change from the first build to
// the second when there are two.
func (r *results) writeTable(w *bytes.Buffer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	head := "| metric | store |"
	rule := "|---|---|"
	for _, b := range r.builds {
		head += " " + b + " |"
		rule += "---:|"
	}
	if len(r.builds) == 2 {
		head += " change |"
		rule += "---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, key := range r.rows() {
		line := "| " + key.metric + " | " + key.store + " |"
		for b := range r.builds {
			line += " " + r.formatCell(key, b) + " |"
		}
		if len(r.builds) == 2 {
			line += " " + r.change(key) + " |"
		}
		fmt.Fprintln(w, line)
	}
}

// rows lists the rows measured, by metric then store.
func (r *results) rows() []rowKey {
	var out []rowKey
	for _, m := range r.metrics {
		for _, s := range r.stores {
			if _, ok := r.kinds[rowKey{m, s}]; ok {
				out = append(out, rowKey{m, s})
			}
		}
	}
	return out
}

func (r *results) formatCell(key rowKey, b int) string {
	v, ok := r.cell(key, b)
	if !ok {
		return "—"
	}
	return format(r.kinds[key], v)
}

// change is the relative change from the first build to the second.
func (r *results) change(key rowKey) string {
	a, okA := r.cell(key, 0)
	b, okB := r.cell(key, 1)
	switch {
	case !okA || !okB:
		return "—"
	case a == b:
		return "0%"
	case a == 0:
		return "—"
	}
	pct := (b - a) / math.Abs(a) * 100
	if math.Abs(pct) < 0.05 {
		return "0%"
	}
	return fmt.Sprintf("%+.1f%%", pct)
}

// format prints v as its kind says.
func format(k kind, v float64) string {
	switch k {
	case kindDuration:
		return formatDuration(time.Duration(v))
	case kindBytes:
		return formatBytes(v)
	case kindRatio:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return thousands(int64(math.Round(v)))
	}
}

func formatDuration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return strconv.FormatFloat(ms*1000, 'f', 1, 64) + " µs"
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	case ms < 100:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	case ms < 10000:
		return thousands(int64(math.Round(ms))) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}

func formatBytes(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1<<20:
		return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB"
	case a >= 10<<10:
		return strconv.FormatFloat(v/(1<<10), 'f', 1, 64) + " KiB"
	}
	return thousands(int64(math.Round(v))) + " B"
}

// thousands prints n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
