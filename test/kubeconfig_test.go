package test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

func TestProxyKubeconfig(t *testing.T) {
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
	p := NewProxy(t, "127.0.0.1:6443")
	data, err := p.Kubeconfig(kubeconfig)
	require.NoError(t, err)
	cfg, err := clientcmd.Load(data)
	require.NoError(t, err)
	assert.Equal(t, "https://"+p.Addr(), cfg.Clusters["seed"].Server)
	assert.Equal(t, []byte("ca"), cfg.Clusters["seed"].CertificateAuthorityData, "the CA stays")
	assert.Equal(t, "secret", cfg.AuthInfos["admin"].Token)
	assert.Equal(t, "seed", cfg.CurrentContext)

	_, err = p.Kubeconfig([]byte("{"))
	assert.Error(t, err)
}
