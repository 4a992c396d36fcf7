package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

func TestProxiedKubeconfig(t *testing.T) {
	kubeconfig := []byte(`apiVersion: v1
kind: Config
clusters:
- name: seed
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: Y2E=}
users:
- name: admin
  user: {token: secret}
contexts:
- name: seed
  context: {cluster: seed, user: admin}
current-context: seed
`)
	data, err := ProxiedKubeconfig(kubeconfig, "127.0.0.1:40001")
	require.NoError(t, err)
	cfg, err := clientcmd.Load(data)
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.1:40001", cfg.Clusters["seed"].Server)
	assert.Equal(t, []byte("ca"), cfg.Clusters["seed"].CertificateAuthorityData, "the CA stays")
	assert.Equal(t, "secret", cfg.AuthInfos["admin"].Token)
	assert.Equal(t, "seed", cfg.CurrentContext)

	_, err = ProxiedKubeconfig([]byte("{"), "127.0.0.1:1")
	assert.Error(t, err)
}

func TestWithKubeconfig(t *testing.T) {
	args := []string{"--kubeconfig=/seed", "--probe-workers=1"}
	assert.Equal(t, []string{"--probe-workers=1", "--kubeconfig=/via-dwd-1"}, withKubeconfig(args, "/via-dwd-1"))
	assert.Equal(t, []string{"--kubeconfig=/seed", "--probe-workers=1"}, args, "the common flags stay")
}
