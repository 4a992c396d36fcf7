package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/replica"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pprof stays off unless --pprof-bind-addr asks for it: no listener of its own, and no /debug/pprof on
// the metrics or health endpoints. (The default of the original's prober and weeder commands is
// checked in TestRoleCommandsTakeEveryUpstreamFlag.)

func TestPprofIsOffByDefault(t *testing.T) {
	assert.Empty(t, newOptions(replica.GroupFor(replica.RoleProber)).pprofBindAddress)
	f := subcommand(t, "run").Flags().Lookup("pprof-bind-addr")
	require.NotNil(t, f)
	assert.Empty(t, f.DefValue)
}

func TestPprofIsServedOnlyWhenAsked(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	for i, asked := range []bool{false, true} {
		t.Run(fmt.Sprintf("asked=%t", asked), func(t *testing.T) {
			before := listeningPorts(t)
			member := fmt.Sprintf("dwd-pprof-%d", i)
			args := []string{"run", "--weeder-config=testdata/weeder.yaml", "--member-name=" + member,
				"--shard-namespace=" + ns, "--shard-group=" + member}
			var pprofAddr string
			if asked {
				pprofAddr = freeLoopbackAddr(t)
				args = append(args, "--pprof-bind-addr="+pprofAddr)
			}
			r := startReplica(t, args...)
			want := []int{port(t, r.metricsAddr), port(t, r.healthAddr)}
			if asked {
				want = append(want, port(t, pprofAddr))
			}
			sort.Ints(want)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Equal(c, want, newPorts(before, listeningPorts(t)))
			}, 30*time.Second, 100*time.Millisecond, "the replica listens on the metrics and health ports, and on pprof's only when asked")
			for _, addr := range []string{r.metricsAddr, r.healthAddr} {
				assert.Equal(t, http.StatusNotFound, status(t, "http://"+addr+"/debug/pprof/"), "no pprof on %s", addr)
			}
			if asked {
				assert.Equal(t, http.StatusOK, status(t, "http://"+pprofAddr+"/debug/pprof/"))
			}
			assert.Equal(t, 0, r.stop(t))
		})
	}
}

// status is the HTTP status of a GET of url.
func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// newPorts lists, in order, the ports in now and not in before.
func newPorts(before, now map[int]bool) []int {
	var ports []int
	for p := range now {
		if !before[p] {
			ports = append(ports, p)
		}
	}
	sort.Ints(ports)
	return ports
}

// listeningPorts returns the TCP ports this process listens on: the listening sockets of the network
// namespace (/proc/net/tcp, tcp6) whose inode is one of this process's file descriptors.
func listeningPorts(t *testing.T) map[int]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		require.NoError(t, err)
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(scanner.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				ports[int(p)] = true
			}
		}
		require.NoError(t, scanner.Err())
		require.NoError(t, f.Close())
	}
	return ports
}
