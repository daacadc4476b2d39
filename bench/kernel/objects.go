//go:build benchkernel

package main

// The synthetic Services and EndpointSlices that the benchmark feeds the proxier.

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const benchNamespace = "bench"

func ipFamilyOf(fam string) v1.IPFamily {
	if fam == FamIPv6 {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

func addressTypeOf(fam string) discovery.AddressType {
	if fam == FamIPv6 {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}

// objects are the Services of one shape and size and their EndpointSlices (one per service
// and family).
type objects struct {
	services []*v1.Service
	slices   map[string][]*discovery.EndpointSlice // family -> slice of service i
}

func buildObjects(sh Shape, size int) *objects {
	nsvc := (size + PortsPerService - 1) / PortsPerService
	o := &objects{slices: map[string][]*discovery.EndpointSlice{}}
	for i := 0; i < nsvc; i++ {
		name := fmt.Sprintf("svc-%05d", i)
		nports := min(PortsPerService, size-i*PortsPerService)
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
			Spec: v1.ServiceSpec{
				Type:            v1.ServiceTypeClusterIP,
				SessionAffinity: v1.ServiceAffinityNone,
				IPFamilyPolicy:  ptr.To(v1.IPFamilyPolicySingleStack),
			},
		}
		if len(sh.Families) > 1 {
			svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
		}
		if sh.Affinity {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}}
		}
		for _, fam := range sh.Families {
			svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, ClusterIP(fam, i))
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, ipFamilyOf(fam))
		}
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
		var epPorts []discovery.EndpointPort
		for p := 0; p < nports; p++ {
			pn := fmt.Sprintf("p%d", 80+p)
			svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: pn, Protocol: v1.ProtocolTCP, Port: int32(80 + p), TargetPort: intstr.FromInt32(int32(8080 + p))})
			epPorts = append(epPorts, discovery.EndpointPort{Name: ptr.To(pn), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(int32(8080 + p))})
		}
		o.services = append(o.services, svc)
		for _, fam := range sh.Families {
			sl := &discovery.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name:      name + "-" + fam,
					Namespace: benchNamespace,
					Labels:    map[string]string{discovery.LabelServiceName: name},
				},
				AddressType: addressTypeOf(fam),
				Ports:       epPorts,
			}
			for e := 0; e < sh.Endpoints; e++ {
				sl.Endpoints = append(sl.Endpoints, endpoint(EndpointIP(fam, i*sh.Endpoints+e), e))
			}
			o.slices[fam] = append(o.slices[fam], sl)
		}
	}
	return o
}

func endpoint(ip string, n int) discovery.Endpoint {
	return discovery.Endpoint{
		Addresses:  []string{ip},
		Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		NodeName:   ptr.To(fmt.Sprintf("node-%d", n%16)),
	}
}

// withExtraEndpoint returns a copy of sl with one more ready endpoint (number n beyond the
// address range of the shape).
func withExtraEndpoint(sl *discovery.EndpointSlice, fam string, n int) *discovery.EndpointSlice {
	c := sl.DeepCopy()
	c.ResourceVersion = fmt.Sprintf("%d", n+2)
	c.Endpoints = append(c.Endpoints, endpoint(EndpointIP(fam, 9_000_000+n), n))
	return c
}
