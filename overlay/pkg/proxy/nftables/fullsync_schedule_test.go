/*
Copyright 2026 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package nftables

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/fullsync"
	"k8s.io/kubernetes/pkg/proxy/fullsync/fullsynctest"
)

func TestFullSyncFollowsSchedule(t *testing.T) {
	fullsynctest.CheckFollowsSchedule(t, func() fullsynctest.Proxier {
		_, fp := NewFakeProxier(v1.IPv4Protocol)
		return fullsynctest.Proxier{
			Mode:            kubeproxyconfig.ProxyModeNFTables,
			Family:          v1.IPv4Protocol,
			SetSchedule:     func(s *fullsync.ProxierSchedule) { fp.fullSync = s },
			Sync:            fp.syncProxyRules,
			LastFullSync:    func() time.Time { return fp.lastFullSync },
			SetLastFullSync: func(t time.Time) { fp.lastFullSync = t },
		}
	})
}
