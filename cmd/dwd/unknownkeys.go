package main

import (
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sharded-dwd/dependency-watchdog/replica"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// unknownKey is a key of a config file that the config does not have.
type unknownKey struct {
	kind  replica.Role
	file  string
	field string // its field path, e.g. dependentResourceInfos[0].scaleUp.delay
}

// unknownFields counts the unknown keys of the config files loaded at start, so that an alert can
// tell a config that dwd partly ignores: the process runs, but `dwd config validate` rejects the file.
var unknownFields = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dwd_config_unknown_fields_total",
	Help: "Keys in the config files that the config does not have, ignored at start, by kind of file (prober, weeder).",
}, []string{"file_kind"})

var registerUnknownFields sync.Once

// countUnknownKeys adds n unknown keys of a file of the given kind; with n = 0 it makes the series
// exist, so that an alert sees the 0.
func countUnknownKeys(kind replica.Role, n int) {
	registerUnknownFields.Do(func() { metrics.Registry.MustRegister(unknownFields) })
	unknownFields.WithLabelValues(string(kind)).Add(float64(n))
}

// warnUnknownKeys logs each unknown key once, with its file and field path.
func (o *options) warnUnknownKeys(log logr.Logger) {
	for _, k := range o.unknownKeys {
		log.Info("Warning: ignoring a key the config does not have; dwd config validate reports it as an error",
			"fileKind", k.kind, "file", k.file, "field", k.field)
	}
}
