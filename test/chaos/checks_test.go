package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/audit/auditcheck"
)

// panicLines returns the lines of the replicas' logs that show a panic or a goroutine dump.
func (c *cluster) panicLines() ([]string, error) {
	logs, err := filepath.Glob(filepath.Join(c.dir, "*.log"))
	if err != nil {
		return nil, err
	}
	var found []string
	for _, log := range logs {
		lines, err := grepPanics(log)
		if err != nil {
			return nil, err
		}
		found = append(found, lines...)
	}
	return found, nil
}

// grepPanics returns the lines of a log that mention a panic or start a goroutine dump.
func grepPanics(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found []string
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if strings.Contains(strings.ToLower(line), "panic") || strings.HasPrefix(line, "goroutine ") {
			found = append(found, filepath.Base(path)+": "+line)
		}
	}
	return found, lines.Err()
}

// unheldWatch samples the partitions held over all replicas and keeps the longest run of samples in
// which some partition was held by no running, answering process. It is the metrics' view: a
// killed or stopped replica's partitions count as unheld at once, which is what the shoots see.
type unheldWatch struct {
	stopCh chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	longest time.Duration
}

// watchUnheld samples every 250ms until stop.
func (c *cluster) watchUnheld(ctx context.Context) *unheldWatch {
	w := &unheldWatch{stopCh: make(chan struct{})}
	w.wg.Go(func() {
		ticker := time.NewTicker(250 * time.Millisecond)
		defer ticker.Stop()
		var since time.Time
		for {
			held, answered := c.heldByAnswering(ctx)
			now := time.Now()
			switch {
			case !answered:
				// a running replica that is not stopped did not answer in time: no sample
			case held < allPartitions && since.IsZero():
				since = now
			case held >= allPartitions:
				since = time.Time{}
			}
			if !since.IsZero() {
				w.mu.Lock()
				w.longest = max(w.longest, now.Sub(since))
				w.mu.Unlock()
			}
			select {
			case <-w.stopCh:
				return
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	})
	return w
}

// heldByAnswering sums the partitions held over the replicas; false when a replica that runs and is
// not stopped did not answer, so that a slow scrape does not count as unheld partitions.
func (c *cluster) heldByAnswering(ctx context.Context) (float64, bool) {
	total := 0.0
	for _, r := range c.replicas {
		n, ok := held(ctx, r)
		if !ok && r.Running() && !r.Paused() {
			return 0, false
		}
		total += n
	}
	return total, true
}

// stop ends the sampling and returns the longest run.
func (w *unheldWatch) stop() time.Duration {
	close(w.stopCh)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

// auditOutcome is what the ownership audit found over every audit log so far.
type auditOutcome struct {
	// ran is false when the binary writes no audit logs: the rest is then empty.
	ran bool
	// problem is the audit's verdict: nil when no two processes held a partition at once and every
	// write was sent by its partition's valid holder.
	problem             error
	overlaps, nonHolder int
	// gaps are the times a partition had no valid holder, over the whole run.
	gaps   []auditcheck.Unheld
	report string
}

// checkAudit runs the ownership audit (package audit) over every process's audit log. The replicas
// get --audit-log when `dwd run --help` lists it (cluster.writeConfigs).
func (c *cluster) checkAudit() (auditOutcome, error) {
	if !c.set.Audit {
		return auditOutcome{}, nil
	}
	var files []string
	for _, f := range c.set.AuditLogs() {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f) // a process that exited at once opened none
		}
	}
	report, err := auditcheck.CheckFiles(files...)
	if err != nil {
		return auditOutcome{}, fmt.Errorf("the audit: %w", err)
	}
	out := auditOutcome{ran: true, problem: report.OK(), overlaps: len(report.Overlaps),
		nonHolder: len(report.NonHolderWrites), gaps: report.Gaps, report: report.String()}
	if out.problem != nil {
		out.problem = fmt.Errorf("the audit: %w\n%s", out.problem, out.report)
	}
	return out, nil
}
