package kpconformance

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kastesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// adminToken is the static bearer token the harness and kube-proxy use (system:masters).
const adminToken = "kpconformance-admin-token"

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts an embedded etcd on loopback, with its data under dir and its log in logDir.
// It returns the client URL and a stop function.
func startEtcd(dir, logDir string) (string, func(), error) {
	cp, err := freePort()
	if err != nil {
		return "", nil, err
	}
	pp, err := freePort()
	if err != nil {
		return "", nil, err
	}
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cp))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pp))
	cfg := embed.NewConfig()
	cfg.Name = "kpconformance"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// A throwaway store: without fsync, etcd does not time out requests when the shared
	// machine's disk is slow.
	cfg.UnsafeNoFsync = true
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(logDir, "etcd.log")}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return "", nil, fmt.Errorf("etcd not ready after 60s")
	}
	return cu.String(), e.Close, nil
}

// apiServer is the running kube-apiserver and what it takes to reach it.
type apiServer struct {
	client   *kubernetes.Clientset
	config   *rest.Config // the admin client's, on loopback
	url      string       // as reached from the node namespace, through the forwarder
	etcdURL  string       // the etcd it stores in (set by startWorld)
	teardown func()
}

// startAPIServer starts kube-apiserver in-process on loopback against etcdURL, with IPv4 and
// IPv6 service CIDRs and a static admin token, and a TCP forwarder on apiRootV4:apiPort so that
// the node namespace can reach it. workDir holds the token file; extraFlags are added to the API
// server's flags (a later flag wins).
func startAPIServer(t *testing.T, etcdURL, workDir string, extraFlags ...string) (*apiServer, error) {
	tokens := filepath.Join(workDir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",kpconformance-admin,uid-admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	sc := storagebackend.NewDefaultConfig("/kpconformance-registry", nil)
	sc.Transport.ServerList = []string{etcdURL}
	ts, err := kastesting.StartTestServer(t, kastesting.NewDefaultTestServerOptions(), append([]string{
		"--service-cluster-ip-range=" + v4.svcCIDR + "," + v6.svcCIDR,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none",
	}, extraFlags...), sc)
	if err != nil {
		return nil, err
	}
	cfg := ts.ClientConfig
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		ts.TearDownFn()
		return nil, err
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		ts.TearDownFn()
		return nil, err
	}
	stopFwd, err := forward(net.JoinHostPort(apiRootV4, fmt.Sprint(apiPort)), target.Host)
	if err != nil {
		ts.TearDownFn()
		return nil, err
	}
	return &apiServer{
		client:   client,
		config:   cfg,
		url:      fmt.Sprintf("https://%s:%d", apiRootV4, apiPort),
		teardown: func() { stopFwd(); ts.TearDownFn() },
	}, nil
}

// forward accepts TCP connections on listen and splices each to target until stop is called.
func forward(listen, target string) (stop func(), err error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return func() { l.Close() }, nil
}

// writeKubeconfig writes kube-proxy's kubeconfig: the forwarded API server, TLS unverified (a
// throwaway self-signed serving certificate), and the admin token.
func writeKubeconfig(path, server string) error {
	return os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kpc
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: kpc
  user:
    token: %s
contexts:
- name: kpc
  context: {cluster: kpc, user: kpc}
current-context: kpc
`, server, adminToken)), 0o600)
}
