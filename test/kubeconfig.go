package test

import (
	"fmt"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"
)

// Kubeconfig is kubeconfig with every server reached through p instead: a process given it reaches
// the API server through the proxy, and Cut cuts it off. The API server's certificate names the
// loopback address, not a port, so it still verifies.
func (p *Proxy) Kubeconfig(kubeconfig []byte) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for name, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		u.Host = p.Addr()
		c.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}
