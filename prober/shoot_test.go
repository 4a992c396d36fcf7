package prober

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// realShootJSON is a Shoot as a Cluster carries it, with many fields dwd does not read.
const realShootJSON = `{
  "apiVersion": "core.gardener.cloud/v1beta1",
  "kind": "Shoot",
  "metadata": {
    "name": "crazy-botany", "namespace": "garden-dev", "uid": "0b2c", "generation": 7,
    "creationTimestamp": "2026-01-02T03:04:05Z",
    "deletionTimestamp": "2026-02-03T04:05:06Z",
    "labels": {"shoot.gardener.cloud/status": "healthy"},
    "annotations": {"gardener.cloud/created-by": "someone"},
    "managedFields": [{"manager": "gardener-apiserver", "operation": "Update"}]
  },
  "spec": {
    "cloudProfileName": "aws", "region": "eu-west-1", "secretBindingName": "my-secret",
    "hibernation": {"enabled": false, "schedules": [{"start": "0 20 * * *", "location": "Europe/Berlin"}]},
    "kubernetes": {
      "version": "1.33.1",
      "kubeAPIServer": {"enableAnonymousAuthentication": false},
      "kubeControllerManager": {"nodeCIDRMaskSize": 24, "nodeMonitorGracePeriod": "2m0s"}
    },
    "networking": {"type": "calico", "nodes": "10.250.0.0/16"},
    "provider": {
      "type": "aws",
      "controlPlaneConfig": {"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "ControlPlaneConfig"},
      "workers": [
        {"name": "cpu-worker", "minimum": 2, "maximum": 5, "machine": {"type": "m5.large"},
         "machineControllerManager": {"drainTimeout": "2h", "nodeConditions": ["ReadonlyFilesystem", "KernelDeadlock"]}},
        {"name": "gpu-worker", "minimum": 0, "maximum": 2, "machine": {"type": "p3.2xlarge"}}
      ]
    }
  },
  "status": {
    "gardener": {"id": "abc", "version": "1.120.0"},
    "isHibernated": true,
    "lastOperation": {"type": "Reconcile", "state": "Processing", "progress": 42, "description": "Waiting", "lastUpdateTime": "2026-02-01T00:00:00Z"},
    "conditions": [{"type": "APIServerAvailable", "status": "True"}],
    "technicalID": "shoot--dev--crazy-botany"
  }
}`

func TestDecodeShootKeepsTheFieldsTheRulesRead(t *testing.T) {
	shoot, err := decodeShoot([]byte(realShootJSON))
	require.NoError(t, err)

	deleted := metav1.NewTime(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC))
	want := &Shoot{
		Metadata: ShootMeta{
			Name: "crazy-botany", Namespace: "garden-dev",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
			DeletionTimestamp: &deleted,
		},
		Spec: ShootSpec{
			Hibernation: &Hibernation{Enabled: ptr.To(false)},
			Provider: Provider{Workers: []Worker{
				{Name: "cpu-worker", MachineControllerManager: &MachineControllerManager{NodeConditions: []string{"ReadonlyFilesystem", "KernelDeadlock"}}},
				{Name: "gpu-worker"},
			}},
			Kubernetes: Kubernetes{KubeControllerManager: &KubeControllerManager{NodeMonitorGracePeriod: &metav1.Duration{Duration: 2 * time.Minute}}},
		},
		Status: ShootStatus{IsHibernated: true, LastOperation: &LastOperation{Type: "Reconcile", State: "Processing",
			LastUpdateTime: &metav1.Time{Time: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).Local()}}},
	}
	assert.True(t, want.Metadata.CreationTimestamp.Equal(&shoot.Metadata.CreationTimestamp))
	assert.True(t, want.Metadata.DeletionTimestamp.Equal(shoot.Metadata.DeletionTimestamp))
	want.Metadata.CreationTimestamp, shoot.Metadata.CreationTimestamp = metav1.Time{}, metav1.Time{}
	want.Metadata.DeletionTimestamp, shoot.Metadata.DeletionTimestamp = nil, nil
	assert.Equal(t, want, shoot)
	assert.False(t, shoot.HibernationEnabled())
}

func TestDecodeShootOfAnEmptyObject(t *testing.T) {
	shoot, err := decodeShoot([]byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, &Shoot{}, shoot)
	assert.False(t, shoot.HibernationEnabled())
}

func TestDecodeShootNullsAreUnset(t *testing.T) {
	shoot, err := decodeShoot([]byte(`{"metadata":{"deletionTimestamp":null,"creationTimestamp":null},
		"spec":{"hibernation":null,"kubernetes":{"kubeControllerManager":{"nodeMonitorGracePeriod":null}}},
		"status":{"lastOperation":null}}`))
	require.NoError(t, err)
	assert.Nil(t, shoot.Metadata.DeletionTimestamp)
	assert.True(t, shoot.Metadata.CreationTimestamp.IsZero())
	assert.Nil(t, shoot.Spec.Hibernation)
	assert.Nil(t, shoot.Spec.Kubernetes.KubeControllerManager.NodeMonitorGracePeriod)
	assert.Nil(t, shoot.Status.LastOperation)
}

func TestDecodeShootErrors(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"nil", "", "spec.shoot is empty"},
		{"blank", " \n\t", "spec.shoot is empty"},
		{"null", "null", "spec.shoot is empty"},
		{"null with spaces", " null ", "spec.shoot is empty"},
		{"truncated", `{"status":`, "decoding spec.shoot: unexpected end of JSON input"},
		{"not JSON", `shoot: yaml`, "decoding spec.shoot: invalid character"},
		{"an array", `[]`, "decoding spec.shoot: the document: expected an object, got a JSON array"},
		{"a string", `"shoot"`, "decoding spec.shoot: the document: expected an object, got a JSON string"},
		{"metadata not an object", `{"metadata":"x"}`, "field metadata: expected an object, got a JSON string"},
		{"name a number", `{"metadata":{"name":5}}`, "field metadata.name: expected a string, got a JSON number"},
		{"deletionTimestamp malformed", `{"metadata":{"deletionTimestamp":"yesterday"}}`, "field metadata.deletionTimestamp: parsing time"},
		{"deletionTimestamp a number", `{"metadata":{"deletionTimestamp":5}}`, "field metadata.deletionTimestamp: expected a string, got a JSON number"},
		{"creationTimestamp malformed", `{"metadata":{"creationTimestamp":"2026-13-01"}}`, "field metadata.creationTimestamp: parsing time"},
		{"hibernation enabled a string", `{"spec":{"hibernation":{"enabled":"yes"}}}`, "field spec.hibernation.enabled: expected a boolean, got a JSON string"},
		{"workers an object", `{"spec":{"provider":{"workers":{}}}}`, "field spec.provider.workers: expected an array, got a JSON object"},
		{"worker name a boolean", `{"spec":{"provider":{"workers":[{"name":true}]}}}`, "field spec.provider.workers.name: expected a string, got a JSON bool"},
		{"nodeConditions a string", `{"spec":{"provider":{"workers":[{"name":"a","machineControllerManager":{"nodeConditions":"DiskPressure"}}]}}}`,
			"field spec.provider.workers.machineControllerManager.nodeConditions: expected an array, got a JSON string"},
		{"grace period malformed", `{"spec":{"kubernetes":{"kubeControllerManager":{"nodeMonitorGracePeriod":"forty"}}}}`,
			`field spec.kubernetes.kubeControllerManager.nodeMonitorGracePeriod: time: invalid duration "forty"`},
		{"grace period a number", `{"spec":{"kubernetes":{"kubeControllerManager":{"nodeMonitorGracePeriod":40}}}}`,
			"field spec.kubernetes.kubeControllerManager.nodeMonitorGracePeriod: expected a string, got a JSON number"},
		{"kubeControllerManager a number", `{"spec":{"kubernetes":{"kubeControllerManager":5}}}`,
			"field spec.kubernetes.kubeControllerManager: expected an object, got a JSON number"},
		{"isHibernated a string", `{"status":{"isHibernated":"true"}}`, "field status.isHibernated: expected a boolean, got a JSON string"},
		{"lastOperation type a number", `{"status":{"lastOperation":{"type":1}}}`, "field status.lastOperation.type: expected a string, got a JSON number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shoot, err := decodeShoot([]byte(tt.raw))
			require.Error(t, err)
			assert.Nil(t, shoot)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDecodeShootTypeErrorsUnwrap(t *testing.T) {
	_, err := decodeShoot([]byte(`{"status":{"isHibernated":1}}`))
	var typeErr *json.UnmarshalTypeError
	require.True(t, errors.As(err, &typeErr), "the encoding/json error stays reachable")
	assert.Equal(t, "status.isHibernated", typeErr.Field)
}

func TestEncodedShootDecodesToTheSame(t *testing.T) {
	shoot, err := decodeShoot([]byte(realShootJSON))
	require.NoError(t, err)
	trimmed, err := json.Marshal(shoot)
	require.NoError(t, err)
	assert.Less(t, len(trimmed), len(realShootJSON)/2, "the encoded form is trimmed")
	again, err := decodeShoot(trimmed)
	require.NoError(t, err)
	assert.Equal(t, shoot, again)

	empty, err := json.Marshal(&Shoot{})
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(empty), "unset fields are left out")
}

// FuzzDecodeShoot decodes any bytes as the Shoot of a Cluster and checks that
//   - nothing panics;
//   - decodeShoot returns a shoot or an error, never both nor neither;
//   - a Cluster carrying the bytes as spec.shoot, decoded as the informer decodes it, yields through
//     shootOf the same shoot, or an error where decodeShoot gives one;
//   - a decoded shoot is safe for the rules (see checkDecidedShoot): a reason exactly when no probe
//     runs, a grace period the default or within the config's bounds, each pool's conditions sorted,
//     distinct and not empty;
//   - the Cluster trimmed as the cache keeps it yields the same decision.
func FuzzDecodeShoot(f *testing.F) {
	for _, seed := range []string{
		realShootJSON, `{}`, `null`, ``, `[]`, `"shoot"`, `{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}}`,
		`{"spec":{"hibernation":{"enabled":true}},"status":{"isHibernated":true}}`,
		`{"spec":{"provider":{"workers":[{"name":"a","machineControllerManager":{"nodeConditions":["X","X"]}}]}},"status":{"lastOperation":{"type":"Create","state":"Succeeded"}}}`,
		`{"spec":{"provider":{"workers":[{"name":"a"},{"name":"a","machineControllerManager":{"nodeConditions":["Z","A"]}}]},` +
			`"kubernetes":{"kubeControllerManager":{"nodeMonitorGracePeriod":"1s"}}},"status":{"lastOperation":{"type":"Reconcile","state":"Failed"}}}`,
		`{"spec":{"provider":{"workers":[{"name":"a"}]},"kubernetes":{"kubeControllerManager":{"nodeMonitorGracePeriod":"2562047h"}}},` +
			`"status":{"lastOperation":{"type":"Restore","state":"Succeeded","lastUpdateTime":null}}}`,
		`{"spec":{"kubernetes":{"kubeControllerManager":{"nodeMonitorGracePeriod":"-5s"}}}}`,
		`{"metadata":{"creationTimestamp":"9999-12-31T23:59:59-23:59"}}`,
		`{"status":{"isHibernated":1e400}}`, `{"spec":{"provider":{"workers":null}}, "spec":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		shoot, err := decodeShoot(raw)
		if err != nil {
			if shoot != nil {
				t.Fatalf("a shoot and an error: %v", err)
			}
		} else if shoot == nil {
			t.Fatal("neither a shoot nor an error")
		}
		checkShootOfCluster(t, raw, shoot)
		if shoot != nil {
			checkDecidedShoot(t, shoot)
		}
	})
}

// TestDecodeShootMatchesFieldNamesExactly: the API server decodes case-sensitively, encoding/json does
// not; a key in another case decides nothing, in decodeShoot as in the cache's trimmed copy.
func TestDecodeShootMatchesFieldNamesExactly(t *testing.T) {
	shoot, err := decodeShoot([]byte(`{"spec":{"Hibernation":{"enabled":true},"provider":{"workers":[{"Name":"a","name":"b"}]}},"status":{"IsHibernated":true}}`))
	require.NoError(t, err)
	assert.False(t, shoot.HibernationEnabled())
	assert.False(t, shoot.Status.IsHibernated)
	require.Len(t, shoot.Spec.Provider.Workers, 1)
	assert.Equal(t, "b", shoot.Spec.Provider.Workers[0].Name)

	shoot, err = decodeShoot([]byte(`{"spec":{"hibernation":{"enabled":true}}}`))
	require.NoError(t, err)
	assert.True(t, shoot.HibernationEnabled(), "the exact name still counts")
	_, err = decodeShoot([]byte(`{"spec":{"hibernation":{"enabled":"yes"}}}`))
	assert.ErrorContains(t, err, "field spec.hibernation.enabled: expected a boolean, got a JSON string")
}

// decodeShoot decodes raw Shoot JSON as the cache's copy of a Cluster's spec.shoot decodes (shootOf). Unknown fields are ignored (a real
// Shoot has hundreds); malformed JSON and values of the wrong type are errors that name the field where
// encoding/json can tell it. Empty or null input is the error "spec.shoot is empty". Field names match
// exactly, as the Kubernetes API server decodes them, not in any case as encoding/json would: a key
// "Hibernation" decides nothing (and the cache's trimmed copy of a Cluster drops it too).
func decodeShoot(raw []byte) (*Shoot, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, errEmptyShoot
	}
	var doc any
	if err := json.Unmarshal(trimmed, &doc); err != nil {
		return nil, fmt.Errorf("decoding spec.shoot: %w", describeJSONError("", err))
	}
	return decodeShootValue(doc)
}
