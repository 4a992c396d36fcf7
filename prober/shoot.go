package prober

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shoot is the part of a Gardener Shoot (core.gardener.cloud/v1beta1) that the lifecycle rules and the
// candidate-node rules read, decoded from the raw JSON in a Cluster's spec.shoot. The JSON names are
// Gardener's; every other field of a real Shoot is ignored. Encoding a Shoot gives the trimmed JSON that
// a cache transform can keep in place of the full object.
type Shoot struct {
	Metadata ShootMeta   `json:"metadata,omitzero"`
	Spec     ShootSpec   `json:"spec,omitzero"`
	Status   ShootStatus `json:"status,omitzero"`
}

// ShootMeta is the Shoot's metadata that matters here.
type ShootMeta struct {
	Name              string       `json:"name,omitempty"`
	Namespace         string       `json:"namespace,omitempty"`
	CreationTimestamp metav1.Time  `json:"creationTimestamp,omitzero"`
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
}

// ShootSpec is spec.hibernation, spec.provider and spec.kubernetes, trimmed.
type ShootSpec struct {
	Hibernation *Hibernation `json:"hibernation,omitempty"`
	Provider    Provider     `json:"provider,omitzero"`
	Kubernetes  Kubernetes   `json:"kubernetes,omitzero"`
}

// Hibernation is spec.hibernation; Enabled is nil when unset, which means not enabled.
type Hibernation struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// Provider is spec.provider; a Shoot without workers is workerless.
type Provider struct {
	Workers []Worker `json:"workers,omitempty"`
}

// Worker is one entry of spec.provider.workers.
type Worker struct {
	Name                     string                    `json:"name"`
	MachineControllerManager *MachineControllerManager `json:"machineControllerManager,omitempty"`
}

// MachineControllerManager is spec.provider.workers[].machineControllerManager.
type MachineControllerManager struct {
	// NodeConditions are the node condition types that make a node of this pool unhealthy when True.
	NodeConditions []string `json:"nodeConditions,omitempty"`
}

// Kubernetes is spec.kubernetes.
type Kubernetes struct {
	KubeControllerManager *KubeControllerManager `json:"kubeControllerManager,omitempty"`
}

// KubeControllerManager is spec.kubernetes.kubeControllerManager.
type KubeControllerManager struct {
	// NodeMonitorGracePeriod overrides the prober's kcmNodeMonitorGraceDuration when set.
	NodeMonitorGracePeriod *metav1.Duration `json:"nodeMonitorGracePeriod,omitempty"`
}

// ShootStatus is status.isHibernated and status.lastOperation.
type ShootStatus struct {
	IsHibernated  bool           `json:"isHibernated,omitempty"`
	LastOperation *LastOperation `json:"lastOperation,omitempty"`
}

// LastOperation is status.lastOperation: its type (Create, Reconcile, Delete, Migrate, Restore) and
// state (Processing, Succeeded, Error, Failed, Pending, Aborted).
type LastOperation struct {
	Type  string `json:"type"`
	State string `json:"state"`
	// LastUpdateTime is when the operation last changed, e.g. when a Restore succeeded.
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// UnmarshalJSON decodes the last operation so that a malformed lastUpdateTime names its field.
func (o *LastOperation) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type           string          `json:"type"`
		State          string          `json:"state"`
		LastUpdateTime json.RawMessage `json:"lastUpdateTime"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*o = LastOperation{Type: raw.Type, State: raw.State}
	return decodeField("status.lastOperation.lastUpdateTime", raw.LastUpdateTime, &o.LastUpdateTime)
}

// HibernationEnabled reports spec.hibernation.enabled, false when unset.
func (s *Shoot) HibernationEnabled() bool {
	h := s.Spec.Hibernation
	return h != nil && h.Enabled != nil && *h.Enabled
}

// errEmptyShoot is returned for a Cluster whose spec.shoot is missing or null.
var errEmptyShoot = errors.New("spec.shoot is empty")

// decodeShootValue decodes a Shoot from its JSON value as encoding/json gives it (maps, slices,
// strings, numbers, booleans), keeping only the keys that are exactly the names of Shoot's fields.
func decodeShootValue(doc any) (*Shoot, error) {
	exact, err := encodeShootValue(doc)
	if err != nil {
		return nil, err
	}
	return decodeShootJSON(exact)
}

// encodeShootValue encodes the keys of a Shoot's JSON value that are exactly the names of Shoot's
// fields, for decodeShootJSON.
func encodeShootValue(doc any) ([]byte, error) {
	exact, err := json.Marshal(exactKeys(doc, reflect.TypeFor[Shoot]()))
	if err != nil {
		return nil, fmt.Errorf("encoding spec.shoot: %w", err)
	}
	return exact, nil
}

// decodeShootJSON decodes a Shoot from what encodeShootValue gives.
func decodeShootJSON(exact []byte) (*Shoot, error) {
	shoot := &Shoot{}
	if err := json.Unmarshal(exact, shoot); err != nil {
		return nil, fmt.Errorf("decoding spec.shoot: %w", describeJSONError("", err))
	}
	return shoot, nil
}

// exactKeys returns a copy of the JSON value v, meant for type t, without the object keys that are not
// exactly the JSON name of a field of t, at every level; v itself is not changed. A struct without
// named fields (metav1.Time, decoded from a string) and every non-object value are kept as they are,
// for the decoder to accept or reject.
func exactKeys(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		fields := map[string]reflect.Type{}
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		if len(fields) == 0 {
			return v
		}
		out := make(map[string]any, len(m))
		for k, fv := range m {
			if ft, ok := fields[k]; ok {
				out[k] = exactKeys(fv, ft)
			}
		}
		return out
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = exactKeys(e, t.Elem())
		}
		return out
	default:
		return v
	}
}

// describeJSONError rewords a type error as "field <path>: expected <kind>, got a JSON <kind>".
// encoding/json fills in the full JSON path of the field when it can; path names the field otherwise
// (empty: the whole document). Other errors are returned as they are. The original error stays
// reachable through errors.As.
func describeJSONError(path string, err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		described *fieldError
	)
	if errors.As(err, &described) || !errors.As(err, &typeErr) || typeErr.Type == nil {
		return err
	}
	where := "the document"
	switch {
	case typeErr.Field != "":
		where = "field " + typeErr.Field
	case path != "":
		where = "field " + path
	}
	return &fieldError{
		msg: fmt.Sprintf("%s: expected %s, got a JSON %s", where, jsonKind(typeErr.Type), typeErr.Value),
		err: err,
	}
}

// fieldError is a decode error worded for people, wrapping encoding/json's.
type fieldError struct {
	msg string
	err error
}

func (e *fieldError) Error() string { return e.msg }
func (e *fieldError) Unwrap() error { return e.err }

// jsonKind names the JSON kind that decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// UnmarshalJSON decodes the metadata field by field so that a malformed timestamp names its field
// (metav1.Time's own error does not).
func (m *ShootMeta) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name              string          `json:"name"`
		Namespace         string          `json:"namespace"`
		CreationTimestamp json.RawMessage `json:"creationTimestamp"`
		DeletionTimestamp json.RawMessage `json:"deletionTimestamp"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = ShootMeta{Name: raw.Name, Namespace: raw.Namespace}
	return errors.Join(
		decodeField("metadata.creationTimestamp", raw.CreationTimestamp, &m.CreationTimestamp),
		decodeField("metadata.deletionTimestamp", raw.DeletionTimestamp, &m.DeletionTimestamp),
	)
}

// UnmarshalJSON decodes the grace period so that a malformed duration names its field
// (metav1.Duration's own error does not).
func (k *KubeControllerManager) UnmarshalJSON(b []byte) error {
	var raw struct {
		NodeMonitorGracePeriod json.RawMessage `json:"nodeMonitorGracePeriod"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*k = KubeControllerManager{}
	return decodeField("spec.kubernetes.kubeControllerManager.nodeMonitorGracePeriod", raw.NodeMonitorGracePeriod, &k.NodeMonitorGracePeriod)
}

// decodeField decodes one raw field value into dst, naming path in the error; an absent field is left
// at its zero value.
func decodeField(path string, raw json.RawMessage, dst any) error {
	if len(raw) == 0 {
		return nil
	}
	err := json.Unmarshal(raw, dst)
	if err == nil {
		return nil
	}
	if described := describeJSONError(path, err); described != err {
		return described
	}
	return fmt.Errorf("field %s: %w", path, err)
}
