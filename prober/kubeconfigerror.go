package prober

import (
	"fmt"
	"strings"
)

// quoteWindow is the shortest run of a kubeconfig's value that counts as quoted: long enough that an
// error's own words do not match random credentials, short enough to catch a quoted fragment.
const quoteWindow = 8

// kubeconfigKeys are the field names of a kubeconfig long enough to be taken for values; an error
// that names them quotes nothing secret.
var kubeconfigKeys = map[string]bool{
	"apiVersion": true, "clusters": true, "certificate-authority": true, "certificate-authority-data": true,
	"insecure-skip-tls-verify": true, "tls-server-name": true, "proxy-url": true, "disable-compression": true,
	"extensions": true, "contexts": true, "namespace": true, "current-context": true, "preferences": true,
	"client-certificate": true, "client-certificate-data": true, "client-key": true, "client-key-data": true,
	"username": true, "password": true, "auth-provider": true, "tokenFile": true,
}

// KubeconfigError wraps err, which a decoder or client-go returned about kubeconfig, as "what: err".
// When err's text quotes a run of quoteWindow characters or more of a value of kubeconfig (decoders
// quote the value they failed on: a token, a key, a URL with its password), the text is withheld:
// the error ends in logs and Events, which more people may read than the Secret.
func KubeconfigError(what string, err error, kubeconfig []byte) error {
	if quotesValue(err.Error(), kubeconfig) {
		return fmt.Errorf("%s (the details are withheld: they would quote the kubeconfig's values)", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// quotesValue reports whether msg holds quoteWindow or more consecutive characters of a value of
// kubeconfig. The values are the words of kubeconfig between YAML, JSON and URL punctuation, and its
// words between YAML and JSON punctuation only (a value such as ab/cd+ef/gh or a URL with a password
// is quoted whole, though each of its pieces is short), less its field names: it need not parse to be
// checked.
func quotesValue(msg string, kubeconfig []byte) bool {
	var long []string
	for _, punctuation := range []string{`:{}[],"'@/`, `{}[],"'`} {
		for _, v := range strings.FieldsFunc(string(kubeconfig), func(r rune) bool {
			return r <= ' ' || strings.ContainsRune(punctuation, r)
		}) {
			v = strings.TrimSuffix(v, ":") // a key, in YAML
			if len(v) >= quoteWindow && !kubeconfigKeys[v] {
				long = append(long, v)
			}
		}
	}
	for i := 0; i+quoteWindow <= len(msg); i++ {
		window := msg[i : i+quoteWindow]
		for _, v := range long {
			if strings.Contains(v, window) {
				return true
			}
		}
	}
	return false
}
