package kpconformance

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// world is what every case uses: the API client and a name sequence.
type world struct {
	c   kubernetes.Interface
	seq int
}

// svcCase is one Service behaviour checked by real traffic under one IP family.
type svcCase struct {
	name string
	run  func(ctx context.Context, w *world, f family) error
}

// cases are run, in order, under each IP family and phase.
var cases = []svcCase{
	{"clusterip-tcp", caseClusterIPTCP},
	{"clusterip-udp", caseClusterIPUDP},
	{"multiple-ports", caseMultiplePorts},
	{"no-endpoints-reject", caseNoEndpoints},
	{"endpoints-add-remove", caseEndpointsChange},
	{"nodeport", caseNodePort},
	{"etp-local", caseExternalLocal},
	{"itp-local", caseInternalLocal},
	{"session-affinity", caseAffinity},
	{"lb-source-ranges", caseLBSourceRanges},
	{"hairpin", caseHairpin},
	{"terminating-endpoint", caseTerminating},
	{"service-deleted", caseServiceDeleted},
}

// service creates Service svc of families fams with its EndpointSlices (endpoints eps, for each
// family) and returns it as the API server allocated it. The caller deletes it.
func (w *world) service(ctx context.Context, base string, fams []family, ports []svcPort, eps []endpoint, mods ...func(*v1.Service)) (*v1.Service, error) {
	w.seq++
	name := fmt.Sprintf("%s-%d", base, w.seq)
	var s *v1.Service
	err := retryAPI(ctx, func() error {
		var err error
		s, err = w.c.CoreV1().Services(ns).Create(ctx, newService(name, fams, ports, mods...), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // an earlier, timed-out attempt went through
			s, err = w.c.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if eps == nil {
		return s, nil
	}
	for _, f := range fams {
		if err := applySlice(ctx, w.c, newSlice(name, f, ports, eps)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// cleanup deletes s (and its slices) at the end of a case.
func (w *world) cleanup(s *v1.Service) {
	if s != nil {
		_ = deleteService(context.Background(), w.c, s.Name)
	}
}

// fromClient is a probe from the client namespace to ip:port.
func fromClient(f family, proto, ip string, port int32) target {
	return target{from: clientNS, src: f.clientIP, proto: proto, host: ip, port: int(port)}
}

func caseClusterIPTCP(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "tcp", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[1]), up(pods[2])})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	return expectPods(ctx, fromClient(f, "tcp", ip, 80), 30, 8080, pods, pods, nil)
}

func caseClusterIPUDP(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "udp", []family{f}, []svcPort{udp53}, []endpoint{up(pods[0]), up(pods[1]), up(pods[2])})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	return expectPods(ctx, fromClient(f, "udp", ip, 53), 30, 8080, pods, pods, nil)
}

func caseMultiplePorts(ctx context.Context, w *world, f family) error {
	ports := []svcPort{tcp80, tcp81, udp53}
	two := pods[:2]
	s, err := w.service(ctx, "ports", []family{f}, ports, []endpoint{up(pods[0]), up(pods[1])})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	for _, p := range ports {
		if err := expectPods(ctx, fromClient(f, map[v1.Protocol]string{v1.ProtocolTCP: "tcp", v1.ProtocolUDP: "udp"}[p.proto], ip, p.port), 20, p.target, two, two, nil); err != nil {
			return err
		}
	}
	return nil
}

func caseNoEndpoints(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "empty", []family{f}, []svcPort{tcp80, udp53}, nil)
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	if err := expectRefused(ctx, fromClient(f, "tcp", ip, 80)); err != nil {
		return err
	}
	return expectRefused(ctx, fromClient(f, "udp", ip, 53))
}

func caseEndpointsChange(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "change", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0])})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	t := fromClient(f, "tcp", ip, 80)
	steps := []struct {
		eps  []endpoint
		want []pod
	}{
		{[]endpoint{up(pods[0])}, pods[:1]},
		{[]endpoint{up(pods[0]), up(pods[1])}, pods[:2]},
		{[]endpoint{up(pods[1])}, pods[1:2]},
	}
	for i, st := range steps {
		if i > 0 {
			if err := applySlice(ctx, w.c, newSlice(s.Name, f, []svcPort{tcp80}, st.eps)); err != nil {
				return err
			}
		}
		if err := expectPods(ctx, t, 20, 8080, st.want, st.want, nil); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	if err := applySlice(ctx, w.c, newSlice(s.Name, f, []svcPort{tcp80}, []endpoint{})); err != nil {
		return err
	}
	return expectRefused(ctx, t)
}

func caseNodePort(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "np", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[2])},
		func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	// Cluster policy: both endpoints, and the source is masqueraded.
	masq := func(r reply) error {
		if r.peer == f.clientIP {
			return fmt.Errorf("peer %s: client address not masqueraded", r.peer)
		}
		return nil
	}
	return expectPods(ctx, fromClient(f, "tcp", f.nodeIP, s.Spec.Ports[0].NodePort), 20, 8080,
		[]pod{pods[0], pods[2]}, []pod{pods[0], pods[2]}, masq)
}

func caseExternalLocal(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "etp", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[2])},
		func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	// Local policy: only the node's own endpoint, and the client's address is preserved.
	preserved := func(r reply) error {
		if r.peer != f.clientIP {
			return fmt.Errorf("peer %s: want the client's own %s", r.peer, f.clientIP)
		}
		return nil
	}
	return expectPods(ctx, fromClient(f, "tcp", f.nodeIP, s.Spec.Ports[0].NodePort), 20, 8080,
		pods[:1], pods[:1], preserved)
}

func caseInternalLocal(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "itp", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[1]), up(pods[2])},
		func(s *v1.Service) {
			local := v1.ServiceInternalTrafficPolicyLocal
			s.Spec.InternalTrafficPolicy = &local
		})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	return expectPods(ctx, fromClient(f, "tcp", ip, 80), 30, 8080, pods[:2], pods[:2], nil)
}

func caseAffinity(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "affinity", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), up(pods[1]), up(pods[2])},
		func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP })
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	if err := expectSticky(ctx, fromClient(f, "tcp", ip, 80), 15); err != nil {
		return err
	}
	t2 := fromClient(f, "tcp", ip, 80)
	t2.src = f.clientIP2
	return expectSticky(ctx, t2, 15)
}

func caseLBSourceRanges(ctx context.Context, w *world, f family) error {
	plen := 32
	if f.v6 {
		plen = 128
	}
	s, err := w.service(ctx, "lb", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0])},
		func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.LoadBalancerSourceRanges = []string{fmt.Sprintf("%s/%d", f.clientIP, plen)}
		})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lbIP}}
	if _, err := w.c.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return err
	}
	allowed := fromClient(f, "tcp", f.lbIP, 80)
	if err := expectPods(ctx, allowed, 10, 8080, pods[:1], pods[:1], nil); err != nil {
		return err
	}
	denied := allowed
	denied.src = f.clientIP2
	return expectDropped(ctx, denied)
}

func caseHairpin(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "hairpin", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0])})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	t := target{from: pods[0].name, proto: "tcp", host: ip, port: 80}
	return expectPods(ctx, t, 10, 8080, pods[:1], pods[:1], nil)
}

func caseTerminating(ctx context.Context, w *world, f family) error {
	term := func(p pod, serving bool) endpoint { return endpoint{pod: p, serving: serving, terminating: true} }
	s, err := w.service(ctx, "term", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0]), term(pods[1], true)})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	t := fromClient(f, "tcp", ip, 80)
	// A ready endpoint exists: the terminating one gets no new connections.
	if err := expectPods(ctx, t, 20, 8080, pods[:1], pods[:1], nil); err != nil {
		return err
	}
	// Only a serving, terminating endpoint is left: traffic falls back to it.
	if err := applySlice(ctx, w.c, newSlice(s.Name, f, []svcPort{tcp80}, []endpoint{term(pods[1], true)})); err != nil {
		return err
	}
	if err := expectPods(ctx, t, 10, 8080, pods[1:2], pods[1:2], nil); err != nil {
		return fmt.Errorf("serving-terminating fallback: %w", err)
	}
	// It stops serving: no usable endpoint is left.
	if err := applySlice(ctx, w.c, newSlice(s.Name, f, []svcPort{tcp80}, []endpoint{term(pods[1], false)})); err != nil {
		return err
	}
	return expectRefused(ctx, t)
}

func caseServiceDeleted(ctx context.Context, w *world, f family) error {
	s, err := w.service(ctx, "gone", []family{f}, []svcPort{tcp80}, []endpoint{up(pods[0])})
	defer w.cleanup(s)
	if err != nil {
		return err
	}
	ip, err := clusterIP(s, f)
	if err != nil {
		return err
	}
	t := fromClient(f, "tcp", ip, 80)
	if err := expectPods(ctx, t, 5, 8080, pods[:1], pods[:1], nil); err != nil {
		return err
	}
	if err := deleteService(ctx, w.c, s.Name); err != nil {
		return err
	}
	if err := expectFails(ctx, t); err != nil {
		return err
	}
	return expectNoRulesFor(ctx, f, ip)
}
