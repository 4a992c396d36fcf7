package prober

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// allowInsecureFlag is the command-line flag that lets kubeconfigs skip TLS verification or use
// plain HTTP; the errors of the gate name it.
const allowInsecureFlag = "--allow-insecure-shoot-kubeconfigs"

// restConfigFromSecret parses the kubeconfig in secret and refuses, before anything is read or run,
// what would make the watchdog run a program or read its own files (exec plugins, auth providers,
// file paths), send its requests elsewhere than to the server (proxy-url) or as someone else
// (impersonation), and, unless allowInsecure, trust an unverified or unencrypted server
// (insecure-skip-tls-verify, a plain http:// server). The errors name the field, never its value.
func restConfigFromSecret(secret *corev1.Secret, allowInsecure bool) (*rest.Config, error) {
	data, ok := secret.Data[KubeconfigKey]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("no %q key", KubeconfigKey)
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, KubeconfigError("invalid kubeconfig", err, data)
	}
	if err := refuseExternalCredentials(raw); err != nil {
		return nil, err
	}
	if err := refuseRedirection(raw); err != nil {
		return nil, err
	}
	if err := refuseInsecureClusters(raw, allowInsecure); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
	if err != nil {
		return nil, KubeconfigError("invalid kubeconfig", err, data)
	}
	if cfg.Host == "" {
		return nil, errors.New("kubeconfig names no server")
	}
	if err := refusePlainHTTP(cfg, allowInsecure, data); err != nil {
		return nil, err
	}
	return cfg, nil
}

// refuseExternalCredentials rejects a kubeconfig whose credentials live outside it.
func refuseExternalCredentials(raw *clientcmdapi.Config) error {
	for _, user := range raw.AuthInfos {
		switch {
		case user.Exec != nil || user.AuthProvider != nil:
			return errors.New("kubeconfig uses an exec plugin or auth provider, which the watchdog does not run")
		case user.ClientCertificate != "" || user.ClientKey != "" || user.TokenFile != "":
			return errors.New("kubeconfig refers to files; it must carry its credentials inline")
		}
	}
	for _, cluster := range raw.Clusters {
		if cluster.CertificateAuthority != "" {
			return errors.New("kubeconfig refers to files; it must carry its CA inline")
		}
	}
	return nil
}

// refuseRedirection rejects a kubeconfig that sends the probes through a proxy, which would see them
// and could answer for the shoot, or as another user than its own (impersonation), which the
// watchdog's access to the shoot was not granted for. No flag allows either.
func refuseRedirection(raw *clientcmdapi.Config) error {
	for _, cluster := range raw.Clusters {
		if cluster.ProxyURL != "" {
			return errors.New("kubeconfig sets proxy-url; the watchdog connects to the shoot's API server directly")
		}
	}
	for _, user := range raw.AuthInfos {
		if user.Impersonate != "" || user.ImpersonateUID != "" || len(user.ImpersonateGroups) > 0 || len(user.ImpersonateUserExtra) > 0 {
			return errors.New("kubeconfig impersonates (as, as-uid, as-groups or as-user-extra); the watchdog probes as the kubeconfig's own user")
		}
	}
	return nil
}

// refuseInsecureClusters rejects a cluster that skips the verification of the server's certificate,
// unless allowInsecure: whoever can answer for the shoot's address could then fake its leases.
func refuseInsecureClusters(raw *clientcmdapi.Config, allowInsecure bool) error {
	if allowInsecure {
		return nil
	}
	for _, cluster := range raw.Clusters {
		if cluster.InsecureSkipTLSVerify {
			return errors.New("kubeconfig sets insecure-skip-tls-verify; the watchdog verifies the shoot's API server against " +
				"certificate-authority-data (" + allowInsecureFlag + " allows it, for labs)")
		}
	}
	return nil
}

// refusePlainHTTP rejects a server that client-go would talk to in plain HTTP (an http:// URL, or a
// host:port with neither a CA nor a client certificate), unless allowInsecure. The server is not
// quoted: its URL may hold a password.
func refusePlainHTTP(cfg *rest.Config, allowInsecure bool, kubeconfig []byte) error {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return KubeconfigError("invalid kubeconfig server", err, kubeconfig)
	}
	if u.Scheme != "https" && !allowInsecure {
		return fmt.Errorf("kubeconfig's server is not https; the watchdog talks to the shoot's API server over TLS only "+
			"(%s allows plain http, for labs)", allowInsecureFlag)
	}
	return nil
}
