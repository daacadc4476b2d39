// Package deploytest checks the deployment manifests under images/deploy: against the
// Kubernetes API (strict decoding, in the patched tree), and their KubeProxyConfiguration
// against the built patched and pristine kube-proxy binaries.
package deploytest
