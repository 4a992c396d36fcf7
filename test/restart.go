package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// StopAPIServer kills the kube-apiserver (SIGKILL: a crash, and no graceful shutdown that waits for
// its clients, which takes longer than envtest's stop timeout) and leaves etcd running, as an outage
// of the seed's API server does. It keeps the server's certificates and keys (envtest removes the folder it made for
// them on Stop) in a new folder under keep, so that StartAPIServer starts it again with the same
// identity: clients that trusted it before still do, and the administrator's credentials still
// authenticate (the client CA lives in the environment, not in the folder).
func (e *Environment) StopAPIServer(keep string) error {
	api := e.env.ControlPlane.APIServer
	saved, err := os.MkdirTemp(keep, "apiserver-")
	if err != nil {
		return err
	}
	if err := copyFiles(api.CertDir, saved); err != nil {
		return fmt.Errorf("keeping the API server's certificates: %w", err)
	}
	if err := killByCertDir(api.CertDir); err != nil {
		return err
	}
	// Stop only tidies up now (it may fail to signal the process that is gone already); it removes the
	// folder it made, which is why the certificates were copied.
	_ = api.Stop()
	// The next Start reads its certificates from here and listens on the same secure port, which
	// Stop keeps; a folder it did not make, it does not remove.
	api.CertDir = saved
	return nil
}

// StartAPIServer starts the kube-apiserver that StopAPIServer stopped, on the same address with the
// same certificates and the same etcd, and waits until it is healthy.
func (e *Environment) StartAPIServer() error {
	api := e.env.ControlPlane.APIServer
	if api.CertDir == "" {
		return errors.New("the API server was not stopped by StopAPIServer")
	}
	api.StartTimeout = controlPlaneStartTimeout
	if err := api.Start(); err != nil {
		return fmt.Errorf("starting the API server again: %w", err)
	}
	return nil
}

// controlPlaneStartTimeout bounds the start of etcd and of the kube-apiserver, the first and after
// StopAPIServer. envtest's 20 s was too short once, for a restart beside the other test packages on 2
// cores.
const controlPlaneStartTimeout = 90 * time.Second

// killByCertDir sends SIGKILL to the kube-apiserver process whose command line names certDir (its
// process is reaped by envtest's Stop, which StopAPIServer calls next). envtest does not expose it.
func killByCertDir(certDir string) error {
	procs, err := procfs.AllProcs()
	if err != nil {
		return err
	}
	for _, p := range procs {
		args, err := p.CmdLine()
		if err != nil || len(args) == 0 || filepath.Base(args[0]) != "kube-apiserver" || !slices.Contains(args, "--cert-dir="+certDir) {
			continue
		}
		return syscall.Kill(p.PID, syscall.SIGKILL)
	}
	return fmt.Errorf("no kube-apiserver process with --cert-dir=%s", certDir)
}

// copyFiles copies the regular files of from into to.
func copyFiles(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		if !entry.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, entry.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, entry.Name()), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
