package memlimit_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/internal/memlimit"
)

func TestTheLimitFollowsTheCgroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   string
		want  memlimit.Decision
		err   string
	}{
		{name: "cgroup v2", files: map[string]string{memlimit.Files[0]: "1073741824\n"},
			want: memlimit.Decision{File: memlimit.Files[0], CgroupLimit: 1 << 30, Limit: 966367641}},
		{name: "cgroup v2 without a limit", files: map[string]string{memlimit.Files[0]: "max\n"},
			want: memlimit.Decision{File: memlimit.Files[0]}},
		{name: "cgroup v1", files: map[string]string{memlimit.Files[1]: "536870912\n"},
			want: memlimit.Decision{File: memlimit.Files[1], CgroupLimit: 1 << 29, Limit: 483183820}},
		{name: "cgroup v1 without a limit", files: map[string]string{memlimit.Files[1]: "9223372036854771712\n"},
			want: memlimit.Decision{File: memlimit.Files[1]}},
		{name: "v2 before v1", files: map[string]string{memlimit.Files[0]: "1073741824", memlimit.Files[1]: "536870912"},
			want: memlimit.Decision{File: memlimit.Files[0], CgroupLimit: 1 << 30, Limit: 966367641}},
		{name: "no cgroup", want: memlimit.Decision{}},
		{name: "own cgroup v2 without a cgroup namespace", files: map[string]string{
			"proc/self/cgroup": "0::/kubepods.slice/pod-a/ctr\n",
			"sys/fs/cgroup/kubepods.slice/pod-a/ctr/memory.max": "1073741824\n",
			memlimit.Files[0]: "max\n"},
			want: memlimit.Decision{File: "sys/fs/cgroup/kubepods.slice/pod-a/ctr/memory.max", CgroupLimit: 1 << 30, Limit: 966367641}},
		{name: "own cgroup v1 without a cgroup namespace", files: map[string]string{
			"proc/self/cgroup": "12:cpu,cpuacct:/kubepods/pod-a/ctr\n11:memory:/kubepods/pod-a/ctr\n",
			"sys/fs/cgroup/memory/kubepods/pod-a/ctr/memory.limit_in_bytes": "536870912\n"},
			want: memlimit.Decision{File: "sys/fs/cgroup/memory/kubepods/pod-a/ctr/memory.limit_in_bytes", CgroupLimit: 1 << 29, Limit: 483183820}},
		{name: "in a cgroup namespace the root is the own cgroup", files: map[string]string{
			"proc/self/cgroup": "0::/\n", memlimit.Files[0]: "1073741824"},
			want: memlimit.Decision{File: memlimit.Files[0], CgroupLimit: 1 << 30, Limit: 966367641}},
		{name: "the own cgroup's file missing, the root's is read", files: map[string]string{
			"proc/self/cgroup": "11:memory:/kubepods/pod-a/ctr\n",
			memlimit.Files[1]:  "536870912\n"},
			want: memlimit.Decision{File: memlimit.Files[1], CgroupLimit: 1 << 29, Limit: 483183820}},
		{name: "a cgroup path that leaves the tree is ignored", files: map[string]string{
			"proc/self/cgroup": "0::/../../etc\n", memlimit.Files[0]: "1073741824"},
			want: memlimit.Decision{File: memlimit.Files[0], CgroupLimit: 1 << 30, Limit: 966367641}},
		{name: "GOMEMLIMIT wins", env: "300MiB", files: map[string]string{memlimit.Files[0]: "1073741824"},
			want: memlimit.Decision{Env: "300MiB"}},
		{name: "garbage", files: map[string]string{memlimit.Files[0]: "lots"},
			want: memlimit.Decision{File: memlimit.Files[0]}, err: `reading the cgroup memory limit from /sys/fs/cgroup/memory.max: "lots" is neither`},
		{name: "zero", files: map[string]string{memlimit.Files[0]: "0"},
			want: memlimit.Decision{File: memlimit.Files[0]}, err: `"0" is neither`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fstest.MapFS{}
			for name, content := range tc.files {
				root[name] = &fstest.MapFile{Data: []byte(content)}
			}
			var set []int64
			got, err := memlimit.FromCgroup(root, func(string) string { return tc.env },
				func(limit int64) int64 { set = append(set, limit); return 0 })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
			if tc.want.Limit > 0 {
				assert.Equal(t, []int64{tc.want.Limit}, set, "the runtime's limit is set once")
			} else {
				assert.Empty(t, set, "no limit is set")
			}
		})
	}
}
