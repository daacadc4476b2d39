// Command manifestcheck checks the deployment manifests under images/deploy against the
// Kubernetes API of the patched tree. It is compiled inside the patched tree (the directory
// name starts with "_" so that this repo's own go commands skip it):
//
//	cd _output/src/v1.36.3/patched && go run /path/to/build/image/_manifestcheck/main.go -dir DIR -out OUT
//
// For every YAML document under DIR:
//   - Kubernetes objects are decoded strictly (unknown or duplicate fields are errors) with
//     client-go's scheme;
//   - a DaemonSet is also applied, as a strategic-merge patch, to a kube-proxy DaemonSet like the
//     ones clusters run, and the result decoded strictly again;
//   - a ConfigMap value that holds a KubeProxyConfiguration is decoded strictly with kube-proxy's
//     own config scheme (the patched one, which knows the ruleSync section) and validated with
//     kube-proxy's validation; it is also written to OUT/<file>.<key>.yaml, so that the caller
//     can load it with the built binaries;
//   - a kustomization is decoded strictly into the fields it may use, and its patch files must
//     exist.
//
// DIR/monitoring (Prometheus rules) is skipped: build/check-monitoring.sh checks it.
//
// It prints one line per document and exits 1 if any check failed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	"k8s.io/kubernetes/pkg/proxy/apis/config/validation"
	"sigs.k8s.io/yaml"
)

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	Patches    []struct {
		Path   string `json:"path,omitempty"`
		Patch  string `json:"patch,omitempty"`
		Target *struct {
			Kind string `json:"kind,omitempty"`
			Name string `json:"name,omitempty"`
		} `json:"target,omitempty"`
	} `json:"patches,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// A kube-proxy DaemonSet as clusters run it, for patches to apply to.
const baseDaemonSet = `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, labels: {k8s-app: kube-proxy}}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      serviceAccountName: kube-proxy
      containers:
      - name: kube-proxy
        image: registry.k8s.io/kube-proxy:v1.36.3
        command: [kube-proxy, --v=2, --config=/var/lib/kube-proxy-config/config, --hostname-override=$(NODE_NAME)]
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {apiVersion: v1, fieldPath: spec.nodeName}}
        securityContext: {privileged: true}
        volumeMounts:
        - {name: config, mountPath: /var/lib/kube-proxy-config/}
        - {name: kubeconfig, mountPath: /var/lib/kube-proxy/}
        - {name: xtables-lock, mountPath: /run/xtables.lock}
        - {name: lib-modules, mountPath: /lib/modules, readOnly: true}
      volumes:
      - {name: config, configMap: {name: kube-proxy-config}}
      - {name: kubeconfig, configMap: {name: kube-proxy}}
      - {name: xtables-lock, hostPath: {path: /run/xtables.lock, type: FileOrCreate}}
      - {name: lib-modules, hostPath: {path: /lib/modules}}
`

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func main() {
	dir := flag.String("dir", "images/deploy", "the manifests")
	out := flag.String("out", "", "where to write the KubeProxyConfigurations found")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "manifestcheck: -out is required")
		os.Exit(2)
	}
	strict := serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

	var files []string
	filepath.Walk(*dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() && p == filepath.Join(*dir, "monitoring") {
			// Prometheus rule files, not Kubernetes objects (and a PrometheusRule, whose CRD
			// client-go's scheme lacks): build/check-monitoring.sh checks them with promtool.
			fmt.Println("skip monitoring/ (Prometheus rules: build/check-monitoring.sh checks them with promtool)")
			return filepath.SkipDir
		}
		if err == nil && !info.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	failed := 0
	fail := func(format string, a ...any) {
		failed++
		fmt.Printf("FAIL "+format+"\n", a...)
	}
	if len(files) == 0 {
		fail("no YAML files under %s", *dir)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fail("%s: %v", f, err)
			continue
		}
		rel, _ := filepath.Rel(*dir, f)
		for i, doc := range docSep.Split(string(data), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			where := fmt.Sprintf("%s#%d", rel, i)
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				fail("%s: not YAML: %v", where, err)
				continue
			}
			if head.Kind == "Kustomization" {
				var k kustomization
				if err := yaml.UnmarshalStrict([]byte(doc), &k); err != nil {
					fail("%s: Kustomization: %v", where, err)
					continue
				}
				for _, p := range k.Patches {
					if p.Path != "" {
						if _, err := os.Stat(filepath.Join(filepath.Dir(f), p.Path)); err != nil {
							fail("%s: patch %s: %v", where, p.Path, err)
						}
					}
				}
				fmt.Printf("ok   %s Kustomization (%d patches)\n", where, len(k.Patches))
				continue
			}
			obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				fail("%s: %v", where, err)
				continue
			}
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				for key, val := range o.Data {
					if !strings.Contains(val, "kind: KubeProxyConfiguration") {
						continue
					}
					if err := checkKubeProxyConfig([]byte(val)); err != nil {
						fail("%s: ConfigMap %s key %s: %v", where, o.Name, key, err)
						continue
					}
					name := strings.NewReplacer("/", "_").Replace(rel) + "." + key + ".yaml"
					if err := os.WriteFile(filepath.Join(*out, name), []byte(val), 0o644); err != nil {
						fail("%s: %v", where, err)
					}
					fmt.Printf("ok   %s ConfigMap %s: %s is a valid KubeProxyConfiguration (strict)\n", where, o.Name, key)
				}
			case *appsv1.DaemonSet:
				if err := checkPatch([]byte(doc), strict); err != nil {
					fail("%s: DaemonSet %s as a patch: %v", where, o.Name, err)
					continue
				}
			}
			fmt.Printf("ok   %s %s %s\n", where, gvk.Kind, objName(obj))
		}
	}
	if failed > 0 {
		fmt.Printf("%d check(s) failed\n", failed)
		os.Exit(1)
	}
}

func objName(o runtime.Object) string {
	if m, ok := o.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return ""
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// checkKubeProxyConfig decodes with kube-proxy's strict codec and validates.
func checkKubeProxyConfig(data []byte) error {
	obj, _, err := proxyconfigscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return err
	}
	cfg, ok := obj.(*kubeproxyconfig.KubeProxyConfiguration)
	if !ok {
		return fmt.Errorf("decoded a %T", obj)
	}
	if errs := validation.Validate(cfg); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// checkPatch applies a DaemonSet patch to baseDaemonSet and decodes the result strictly.
func checkPatch(patchYAML []byte, strict runtime.Decoder) error {
	base, err := yaml.YAMLToJSON([]byte(baseDaemonSet))
	if err != nil {
		return err
	}
	patch, err := yaml.YAMLToJSON(patchYAML)
	if err != nil {
		return err
	}
	merged, err := strategicpatch.StrategicMergePatch(base, patch, appsv1.DaemonSet{})
	if err != nil {
		return err
	}
	obj, _, err := strict.Decode(merged, nil, nil)
	if err != nil {
		return fmt.Errorf("the patched DaemonSet: %w", err)
	}
	ds := obj.(*appsv1.DaemonSet)
	var want, got string
	var p appsv1.DaemonSet
	yaml.Unmarshal(patchYAML, &p)
	for _, c := range p.Spec.Template.Spec.Containers {
		if c.Name == "kube-proxy" {
			want = c.Image
		}
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "kube-proxy" {
			got = c.Image
		}
	}
	if len(ds.Spec.Template.Spec.Containers) != 1 || want == "" || got != want {
		return fmt.Errorf("after the patch: %d containers, kube-proxy image %q (the patch sets %q)", len(ds.Spec.Template.Spec.Containers), got, want)
	}
	if !bytes.Contains(merged, []byte("/lib/modules")) {
		return fmt.Errorf("the patch dropped the DaemonSet's volumes")
	}
	return nil
}
