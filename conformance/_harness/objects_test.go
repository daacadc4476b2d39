package kpconformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const ns = "default"

// ensureNode creates (or updates) the Node kube-proxy runs as, with InternalIPs of fams only, so
// that kube-proxy's primary family is fams[0].
func ensureNode(ctx context.Context, c kubernetes.Interface, fams []family) error {
	n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	n.Status.Addresses = nil
	for _, f := range fams {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: f.nodeIP})
	}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// svcPort is one Service port: its name, protocol, port and the pods' target port.
type svcPort struct {
	name   string
	proto  v1.Protocol
	port   int32
	target int
}

var (
	tcp80 = svcPort{"http", v1.ProtocolTCP, 80, 8080}
	tcp81 = svcPort{"alt", v1.ProtocolTCP, 81, 8081}
	udp53 = svcPort{"dns", v1.ProtocolUDP, 53, 8080}
)

// newService returns a Service of families fams (single-stack for one, RequireDualStack for two)
// with ports; mods adjust it before it is created.
func newService(name string, fams []family, ports []svcPort, mods ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP},
	}
	for _, f := range fams {
		if f.v6 {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, v1.IPv6Protocol)
		} else {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, v1.IPv4Protocol)
		}
	}
	pol := v1.IPFamilyPolicySingleStack
	if len(fams) > 1 {
		pol = v1.IPFamilyPolicyRequireDualStack
	}
	s.Spec.IPFamilyPolicy = &pol
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: p.name, Protocol: p.proto, Port: p.port, TargetPort: intstr.FromInt(p.target)})
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// endpoint is one endpoint of a slice, with its conditions.
type endpoint struct {
	pod         pod
	ready       bool
	serving     bool
	terminating bool
}

// up returns a ready, serving endpoint for p.
func up(p pod) endpoint { return endpoint{pod: p, ready: true, serving: true} }

// newSlice returns the EndpointSlice of Service svc for family f, labelled the way the
// EndpointSlice controller labels its own.
func newSlice(svc string, f family, ports []svcPort, eps []endpoint) *discovery.EndpointSlice {
	at := discovery.AddressTypeIPv4
	if f.v6 {
		at = discovery.AddressTypeIPv6
	}
	sl := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      svc + "-" + f.name,
			Namespace: ns,
			Labels: map[string]string{
				discovery.LabelServiceName: svc,
				discovery.LabelManagedBy:   "kpconformance.example.com",
			},
		},
		AddressType: at,
	}
	for _, p := range ports {
		sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: ptr.To(p.name), Protocol: ptr.To(p.proto), Port: ptr.To(int32(p.target))})
	}
	for _, e := range eps {
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{
			Addresses:  []string{f.podIP(e.pod.index)},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating)},
			NodeName:   ptr.To(e.pod.node),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod.name},
		})
	}
	return sl
}

// retryAPI calls fn until it succeeds, fails with an error that is not transient (a timeout
// or an internal error of the API server or etcd), or 30s pass. The harness's own API writes
// must not fail a kube-proxy case on a slow machine.
func retryAPI(ctx context.Context, fn func() error) error {
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		err = fn()
		transient := apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
			apierrors.IsTooManyRequests(err) || (err != nil && strings.Contains(err.Error(), "timed out"))
		if !transient || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// applySlice creates or replaces an EndpointSlice, retrying transient API errors.
func applySlice(ctx context.Context, c kubernetes.Interface, sl *discovery.EndpointSlice) error {
	return retryAPI(ctx, func() error { return applySliceOnce(ctx, c, sl.DeepCopy()) })
}

// applySliceOnce creates or replaces an EndpointSlice.
func applySliceOnce(ctx context.Context, c kubernetes.Interface, sl *discovery.EndpointSlice) error {
	cur, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx, sl.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	sl.ResourceVersion = cur.ResourceVersion
	_, err = c.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{})
	return err
}

// deleteService deletes a Service and its EndpointSlices; missing objects are not an error.
func deleteService(ctx context.Context, c kubernetes.Interface, name string) error {
	err := c.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return c.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + name})
}

// clusterIP returns the Service's ClusterIP of family f.
func clusterIP(s *v1.Service, f family) (string, error) {
	for _, ip := range s.Spec.ClusterIPs {
		if isV6(ip) == f.v6 {
			return ip, nil
		}
	}
	return "", fmt.Errorf("service %s has no %s ClusterIP (%v)", s.Name, f.name, s.Spec.ClusterIPs)
}

// isV6 reports whether ip is an IPv6 address literal.
func isV6(ip string) bool {
	for _, r := range ip {
		if r == ':' {
			return true
		}
	}
	return false
}
