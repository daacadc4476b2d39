package kpconformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	kpe2e "k8s.io/kubernetes/test/kpe2e"
	"k8s.io/utils/ptr"
)

// loadWorkers is how many requests the loader keeps in flight.
const loadWorkers = 8

// loadServices creates Services from (inclusive) to to (exclusive) of the plan, with their
// EndpointSlices and LoadBalancer status, through the API server at its own pace, and prints a
// progress bar with the rate every 2 seconds.
func loadServices(ctx context.Context, c kubernetes.Interface, p kpe2e.Params, from, to int) error {
	if from >= to {
		return nil
	}
	var done, objects atomic.Int64
	start := time.Now()
	stopBar := make(chan struct{})
	barDone := make(chan struct{})
	go func() {
		defer close(barDone)
		for {
			select {
			case <-stopBar:
				return
			case <-time.After(2 * time.Second):
				progressBar(start, int(done.Load()), to-from, objects.Load())
			}
		}
	}()
	err := inParallel(from, to, func(i int) error {
		n, _, err := createPlanned(ctx, c, kpe2e.Plan(p, i), nil)
		objects.Add(int64(n))
		if err != nil {
			return fmt.Errorf("service %d: %w", i, err)
		}
		done.Add(1)
		return nil
	})
	close(stopBar)
	<-barDone
	progressBar(start, int(done.Load()), to-from, objects.Load())
	return err
}

// inParallel calls fn for every i from (inclusive) to to (exclusive), loadWorkers calls at a
// time, and returns the first error; once a call has failed no new one starts.
func inParallel(from, to int, fn func(i int) error) error {
	next := make(chan int)
	errc := make(chan error, loadWorkers)
	var wg sync.WaitGroup
	for w := 0; w < loadWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case err = <-errc:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// progressBar prints one line: a bar, Services done of total, and the objects written per second.
func progressBar(start time.Time, done, total int, objects int64) {
	const width = 30
	filled := done * width / max(total, 1)
	el := time.Since(start).Seconds()
	rate := float64(objects) / max(el, 0.001)
	eta := "-"
	if done > 0 && done < total {
		eta = fmt.Sprintf("%.0fs", el/float64(done)*float64(total-done))
	}
	progress("load [%s%s] %d/%d Services, %d objects, %.0f objects/s, %.0fs, eta %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, objects, rate, el, eta)
}

// createPlanned creates one planned Service, its LoadBalancer status and its EndpointSlices
// (with sliceAnnotations), retrying transient API errors, and returns how many writes
// succeeded and the Service as created.
func createPlanned(ctx context.Context, c kubernetes.Interface, s kpe2e.Service, sliceAnnotations map[string]string) (int, *v1.Service, error) {
	svc := plannedService(s)
	var created *v1.Service
	err := retryAPI(ctx, func() error {
		var err error
		created, err = c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	n := 1
	if len(s.LBIPs) > 0 {
		for _, ip := range s.LBIPs {
			created.Status.LoadBalancer.Ingress = append(created.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
		if err := retryAPI(ctx, func() error {
			_, err := c.CoreV1().Services(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return n, created, err
		}
		n++
	}
	for _, sl := range s.Slices {
		if err := retryAPI(ctx, func() error {
			_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, plannedSlice(s, sl, sliceAnnotations), metav1.CreateOptions{})
			return err
		}); err != nil {
			return n, created, err
		}
		n++
	}
	return n, created, nil
}

// plannedService returns the API object of a planned Service.
func plannedService(s kpe2e.Service) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns},
		Spec:       v1.ServiceSpec{Type: v1.ServiceType(s.Type)},
	}
	for _, f := range s.Families {
		if f == kpe2e.FamilyIPv6 {
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, v1.IPv6Protocol)
		} else {
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, v1.IPv4Protocol)
		}
	}
	pol := v1.IPFamilyPolicySingleStack
	if len(s.Families) > 1 {
		pol = v1.IPFamilyPolicyRequireDualStack
	}
	svc.Spec.IPFamilyPolicy = &pol
	if s.Affinity {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	}
	for _, p := range s.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: p.Name, Protocol: v1.Protocol(p.Proto), Port: p.Port,
			TargetPort: intstr.FromInt32(p.Target)})
	}
	return svc
}

// plannedSlice returns the API object of a planned EndpointSlice, labelled as the EndpointSlice
// controller labels its own; annotations are added to it (the trigger time of a change).
func plannedSlice(s kpe2e.Service, sl kpe2e.Slice, annotations map[string]string) *discovery.EndpointSlice {
	at := discovery.AddressTypeIPv4
	if sl.Family == kpe2e.FamilyIPv6 {
		at = discovery.AddressTypeIPv6
	}
	out := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      sl.Name,
			Namespace: ns,
			Labels: map[string]string{
				discovery.LabelServiceName: s.Name,
				discovery.LabelManagedBy:   "bench-e2e.example.com",
			},
			Annotations: annotations,
		},
		AddressType: at,
	}
	for _, p := range s.Ports {
		out.Ports = append(out.Ports, discovery.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(v1.Protocol(p.Proto)), Port: ptr.To(p.Target)})
	}
	for _, a := range sl.Addresses {
		out.Endpoints = append(out.Endpoints, discovery.Endpoint{
			Addresses:  []string{a},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(farNode),
		})
	}
	return out
}
