"""Decoding of Kubernetes protobuf request bodies into the JSON objects a JSON client would send.

kubectl's typed commands (``kubectl create deployment|namespace|configmap|secret|service|job|
cronjob|poddisruptionbudget|serviceaccount|quota|role|clusterrole|rolebinding|
clusterrolebinding|priorityclass``, ``kubectl debug --copy-to``, ...) send their
request bodies as ``application/vnd.kubernetes.protobuf`` and never fall back to JSON (commands
that go through the unstructured client, such as ``kubectl run``, ``apply`` and ``drain``'s
evictions, post JSON). The embedded API server keeps every object as JSON, so this module turns
such a body into the same dict a JSON client would have posted. Only decoding is needed: answers
stay JSON, which every client accepts.

Wire format
    A body is the 4-byte magic ``k8s\\x00`` followed by a ``runtime.Unknown`` message: field 1
    ``typeMeta`` (1 ``apiVersion``, 2 ``kind``), field 2 ``raw`` (the object's own message),
    3 ``contentEncoding`` and 4 ``contentType`` (both empty in practice). Objects are proto2
    messages whose field numbers are those of the ``generated.proto`` files of k8s.io/api and
    k8s.io/apimachinery.

Kinds
    ``v1`` Pod, Namespace, ConfigMap, Secret, Service, ServiceAccount, Binding, Node, Endpoints,
    Event, ResourceQuota, PersistentVolume and PersistentVolumeClaim; ``apps/v1`` Deployment,
    ReplicaSet and DaemonSet; ``batch/v1`` Job and CronJob; ``policy/v1`` PodDisruptionBudget
    and Eviction; ``rbac.authorization.k8s.io/v1`` Role, ClusterRole, RoleBinding and
    ClusterRoleBinding; ``coordination.k8s.io/v1`` Lease; ``scheduling.k8s.io/v1``
    PriorityClass (``kubectl create priorityclass``); ``storage.k8s.io/v1`` StorageClass,
    CSINode and CSIDriver; ``autoscaling/v1`` Scale; ``events.k8s.io/v1`` Event; and
    DeleteOptions under any apiVersion. Statuses are covered too, so nothing a client (kubectl,
    or a client-go controller such as kube-scheduler's volume binder) may send is refused.

Design
    One generic loop (:func:`_fields`) walks the four wire types (varint, 64-bit,
    length-delimited, 32-bit) and everything else is driven by :data:`_TABLE`, a hand-written,
    compact description of each message: ``"NUMBER JSONNAME TYPE"`` triples, where ``TYPE`` is

    * a scalar: ``str``, ``bytes`` (base64 in JSON), ``bool``, ``i32``, ``i64``;
    * a Kubernetes special: ``quantity`` (``resource.Quantity``, its string), ``intstr``
      (``intstr.IntOrString``, a JSON int or string), ``time`` (``metav1.Time``, RFC 3339 at
      second precision, ``null`` when zero), ``microtime`` (``metav1.MicroTime``, six fractional
      digits), ``duration`` (``metav1.Duration``, Go's ``time.Duration`` string) and ``json``
      (``metav1.FieldsV1``, embedded raw JSON);
    * the name of another message in the table;

    prefixed with ``[]`` for a repeated field or wrapped as ``{T}`` for a ``map<string, T>``
    (repeated entry messages, key = 1, value = 2), and suffixed with ``!`` to keep a zero value
    or ``^`` for a Go struct embedded with ``json:",inline"`` (its fields are merged into the
    parent object, e.g. ``Volume.volumeSource`` and ``Probe.handler``). ``-`` marks a field
    that is known but not supported here (the legacy in-tree volume plugins, and
    ``PodSpec.workloadRef``, an alpha field of 1.35 that 1.36 replaced): it is rejected by
    name. The JSON names are the ``json`` tags of the Go types, which for every field covered
    here equal the proto field names (including the odd ``DaemonEndpoint.Port``).

    Every field of every message in the table is listed, as of Kubernetes 1.36 (a superset of
    what kubectl 1.32 sends), so nothing is silently dropped: a field number that is not in
    the table, a wire type that does not fit the field, a truncated or malformed message or
    an unknown kind raises :class:`ProtobufError` naming the message, the field number and
    where in the object it was found.

Zero values
    Go's JSON encoder omits a non-pointer ``omitempty`` scalar when it is zero, whereas the
    protobuf encoder writes every non-pointer field, zero or not. A scalar field is therefore
    kept when zero (``""``, ``0``, ``false``) only if the table marks it with ``!``, which is
    done exactly for the fields whose Go type is a pointer (``replicas``,
    ``terminationGracePeriodSeconds``, ``automountServiceAccountToken``, ...) or whose ``json``
    tag has no ``omitempty`` (``Container.name``, ``ContainerPort.containerPort``,
    ``ServicePort.port``, ...) -- the same rule Go's JSON encoder applies. Elements of
    repeated fields and map values are always kept. Message-valued fields are kept whenever
    they are on the wire, so empty non-pointer structs come out as ``{}`` (``status: {}``,
    ``resources: {}``, ``strategy: {}``) and a zero ``metav1.Time`` as ``None`` (JSON
    ``null``, e.g. ``creationTimestamp: null``), exactly as in kubectl's JSON. The only
    remaining difference is for a nil slice or map whose ``json`` tag lacks ``omitempty``
    (``PodSpec.containers``): JSON has ``null``, protobuf has nothing, and the key is absent.

Other conventions follow the Go decoder: a singular message field that occurs more than once
is merged (its occurrences are concatenated before decoding), a singular scalar's last
occurrence wins, repeated numeric fields are accepted packed or unpacked, ``int32``/``int64``
values are two's complement (negative values arrive as ten-byte varints), ``metav1.Time``
drops the nanoseconds and ``MicroTime`` truncates them to microseconds, and strings that are
not valid UTF-8 get U+FFFD replacement characters as Go's JSON encoder would give them.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["MAGIC", "MEDIA_TYPE", "ProtobufError", "decode"]

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body that is not a well-formed Kubernetes protobuf message of a supported kind."""


# -- the schema ------------------------------------------------------------------------------------

# Message name -> "NUMBER JSONNAME TYPE" triples, in the order of the .proto files. See the module
# docstring for the TYPE syntax. Names clash only for events.k8s.io/v1, whose messages are
# prefixed with "events.".
_TABLE: dict[str, str] = {
    # ---- k8s.io/apimachinery/pkg/apis/meta/v1 ----
    "ObjectMeta": """
        1 name str  2 generateName str  3 namespace str  4 selfLink str  5 uid str
        6 resourceVersion str  7 generation i64  8 creationTimestamp time
        9 deletionTimestamp time  10 deletionGracePeriodSeconds i64!  11 labels {str}
        12 annotations {str}  13 ownerReferences []OwnerReference  14 finalizers []str
        17 managedFields []ManagedFieldsEntry""",
    "OwnerReference": """
        5 apiVersion str!  1 kind str!  3 name str!  4 uid str!  6 controller bool!
        7 blockOwnerDeletion bool!""",
    "ManagedFieldsEntry": """
        1 manager str  2 operation str  3 apiVersion str  4 time time  6 fieldsType str
        7 fieldsV1 json  8 subresource str""",
    "LabelSelector": """
        1 matchLabels {str}  2 matchExpressions []LabelSelectorRequirement""",
    "LabelSelectorRequirement": """
        1 key str!  2 operator str!  3 values []str""",
    "Condition": """
        1 type str!  2 status str!  3 observedGeneration i64  4 lastTransitionTime time
        5 reason str!  6 message str!""",
    "DeleteOptions": """
        1 gracePeriodSeconds i64!  2 preconditions Preconditions  3 orphanDependents bool!
        4 propagationPolicy str!  5 dryRun []str
        6 ignoreStoreReadErrorWithClusterBreakingPotential bool!""",
    "Preconditions": """
        1 uid str!  2 resourceVersion str!""",
    # ---- core/v1: objects ----
    "Pod": """
        1 metadata ObjectMeta  2 spec PodSpec  3 status PodStatus""",
    "Namespace": """
        1 metadata ObjectMeta  2 spec NamespaceSpec  3 status NamespaceStatus""",
    "NamespaceSpec": """
        1 finalizers []str""",
    "NamespaceStatus": """
        1 phase str  2 conditions []NamespaceCondition""",
    "NamespaceCondition": """
        1 type str!  2 status str!  4 lastTransitionTime time  5 reason str  6 message str""",
    "ConfigMap": """
        1 metadata ObjectMeta  4 immutable bool!  2 data {str}  3 binaryData {bytes}""",
    "Secret": """
        1 metadata ObjectMeta  5 immutable bool!  2 data {bytes}  4 stringData {str}  3 type str""",
    "ServiceAccount": """
        1 metadata ObjectMeta  2 secrets []ObjectReference
        3 imagePullSecrets []LocalObjectReference  4 automountServiceAccountToken bool!""",
    "Binding": """
        1 metadata ObjectMeta  2 target ObjectReference""",
    "ObjectReference": """
        1 kind str  2 namespace str  3 name str  4 uid str  5 apiVersion str
        6 resourceVersion str  7 fieldPath str""",
    "LocalObjectReference": """
        1 name str""",
    "Endpoints": """
        1 metadata ObjectMeta  2 subsets []EndpointSubset""",
    "EndpointSubset": """
        1 addresses []EndpointAddress  2 notReadyAddresses []EndpointAddress
        3 ports []EndpointPort""",
    "EndpointAddress": """
        1 ip str!  3 hostname str  4 nodeName str!  2 targetRef ObjectReference""",
    "EndpointPort": """
        1 name str  2 port i32!  3 protocol str  4 appProtocol str!""",
    "Event": """
        1 metadata ObjectMeta  2 involvedObject ObjectReference  3 reason str  4 message str
        5 source EventSource  6 firstTimestamp time  7 lastTimestamp time  8 count i32  9 type str
        10 eventTime microtime  11 series EventSeries  12 action str  13 related ObjectReference
        14 reportingComponent str!  15 reportingInstance str!""",
    "EventSource": """
        1 component str  2 host str""",
    "EventSeries": """
        1 count i32  2 lastObservedTime microtime""",
    "ResourceQuota": """
        1 metadata ObjectMeta  2 spec ResourceQuotaSpec  3 status ResourceQuotaStatus""",
    "ResourceQuotaSpec": """
        1 hard {quantity}  2 scopes []str  3 scopeSelector ScopeSelector""",
    "ScopeSelector": """
        1 matchExpressions []ScopedResourceSelectorRequirement""",
    "ScopedResourceSelectorRequirement": """
        1 scopeName str!  2 operator str!  3 values []str""",
    "ResourceQuotaStatus": """
        1 hard {quantity}  2 used {quantity}""",
    # ---- core/v1: Service ----
    "Service": """
        1 metadata ObjectMeta  2 spec ServiceSpec  3 status ServiceStatus""",
    "ServiceSpec": """
        1 ports []ServicePort  2 selector {str}  3 clusterIP str  18 clusterIPs []str  4 type str
        5 externalIPs []str  7 sessionAffinity str  8 loadBalancerIP str
        9 loadBalancerSourceRanges []str  10 externalName str  11 externalTrafficPolicy str
        12 healthCheckNodePort i32  13 publishNotReadyAddresses bool
        14 sessionAffinityConfig SessionAffinityConfig  19 ipFamilies []str
        17 ipFamilyPolicy str!  20 allocateLoadBalancerNodePorts bool!  21 loadBalancerClass str!
        22 internalTrafficPolicy str!  23 trafficDistribution str!""",
    "ServicePort": """
        1 name str  2 protocol str  6 appProtocol str!  3 port i32!  4 targetPort intstr
        5 nodePort i32""",
    "SessionAffinityConfig": """
        1 clientIP ClientIPConfig""",
    "ClientIPConfig": """
        1 timeoutSeconds i32!""",
    "ServiceStatus": """
        1 loadBalancer LoadBalancerStatus  2 conditions []Condition""",
    "LoadBalancerStatus": """
        1 ingress []LoadBalancerIngress""",
    "LoadBalancerIngress": """
        1 ip str  2 hostname str  3 ipMode str!  4 ports []PortStatus""",
    "PortStatus": """
        1 port i32!  2 protocol str!  3 error str!""",
    # ---- core/v1: Node ----
    "Node": """
        1 metadata ObjectMeta  2 spec NodeSpec  3 status NodeStatus""",
    "NodeSpec": """
        1 podCIDR str  7 podCIDRs []str  3 providerID str  4 unschedulable bool  5 taints []Taint
        6 configSource NodeConfigSource  2 externalID str""",
    "Taint": """
        1 key str!  2 value str  3 effect str!  4 timeAdded time""",
    "NodeConfigSource": """
        2 configMap ConfigMapNodeConfigSource""",
    "ConfigMapNodeConfigSource": """
        1 namespace str!  2 name str!  3 uid str  4 resourceVersion str  5 kubeletConfigKey str!""",
    "NodeStatus": """
        1 capacity {quantity}  2 allocatable {quantity}  3 phase str  4 conditions []NodeCondition
        5 addresses []NodeAddress  6 daemonEndpoints NodeDaemonEndpoints
        7 nodeInfo NodeSystemInfo  8 images []ContainerImage  9 volumesInUse []str
        10 volumesAttached []AttachedVolume  11 config NodeConfigStatus
        12 runtimeHandlers []NodeRuntimeHandler  13 features NodeFeatures
        14 declaredFeatures []str""",
    "NodeCondition": """
        1 type str!  2 status str!  3 lastHeartbeatTime time  4 lastTransitionTime time
        5 reason str  6 message str""",
    "NodeAddress": """
        1 type str!  2 address str!""",
    "NodeDaemonEndpoints": """
        1 kubeletEndpoint DaemonEndpoint""",
    "DaemonEndpoint": """
        1 Port i32!""",
    "NodeSystemInfo": """
        1 machineID str!  2 systemUUID str!  3 bootID str!  4 kernelVersion str!  5 osImage str!
        6 containerRuntimeVersion str!  7 kubeletVersion str!  8 kubeProxyVersion str!
        9 operatingSystem str!  10 architecture str!  11 swap NodeSwapStatus""",
    "NodeSwapStatus": """
        1 capacity i64!""",
    "ContainerImage": """
        1 names []str  2 sizeBytes i64""",
    "AttachedVolume": """
        1 name str!  2 devicePath str!""",
    "NodeConfigStatus": """
        1 assigned NodeConfigSource  2 active NodeConfigSource  3 lastKnownGood NodeConfigSource
        4 error str""",
    "NodeRuntimeHandler": """
        1 name str!  2 features NodeRuntimeHandlerFeatures""",
    "NodeRuntimeHandlerFeatures": """
        1 recursiveReadOnlyMounts bool!  2 userNamespaces bool!""",
    "NodeFeatures": """
        1 supplementalGroupsPolicy bool!""",
    # ---- core/v1: PodSpec ----
    "PodTemplateSpec": """
        1 metadata ObjectMeta  2 spec PodSpec""",
    "PodSpec": """
        1 volumes []Volume  20 initContainers []Container  2 containers []Container
        34 ephemeralContainers []EphemeralContainer  3 restartPolicy str
        4 terminationGracePeriodSeconds i64!  5 activeDeadlineSeconds i64!  6 dnsPolicy str
        7 nodeSelector {str}  8 serviceAccountName str  9 serviceAccount str
        21 automountServiceAccountToken bool!  10 nodeName str  11 hostNetwork bool
        12 hostPID bool  13 hostIPC bool  27 shareProcessNamespace bool!
        14 securityContext PodSecurityContext  15 imagePullSecrets []LocalObjectReference
        16 hostname str  17 subdomain str  18 affinity Affinity  19 schedulerName str
        22 tolerations []Toleration  23 hostAliases []HostAlias  24 priorityClassName str
        25 priority i32!  26 dnsConfig PodDNSConfig  28 readinessGates []PodReadinessGate
        29 runtimeClassName str!  30 enableServiceLinks bool!  31 preemptionPolicy str!
        32 overhead {quantity}  33 topologySpreadConstraints []TopologySpreadConstraint
        35 setHostnameAsFQDN bool!  36 os PodOS  37 hostUsers bool!
        38 schedulingGates []PodSchedulingGate  39 resourceClaims []PodResourceClaim
        40 resources ResourceRequirements  41 hostnameOverride str!  42 workloadRef -
        43 schedulingGroup PodSchedulingGroup""",
    "PodSecurityContext": """
        1 seLinuxOptions SELinuxOptions  8 windowsOptions WindowsSecurityContextOptions
        2 runAsUser i64!  6 runAsGroup i64!  3 runAsNonRoot bool!  4 supplementalGroups []i64
        12 supplementalGroupsPolicy str!  5 fsGroup i64!  7 sysctls []Sysctl
        9 fsGroupChangePolicy str!  10 seccompProfile SeccompProfile
        11 appArmorProfile AppArmorProfile  13 seLinuxChangePolicy str!""",
    "SELinuxOptions": """
        1 user str  2 role str  3 type str  4 level str""",
    "WindowsSecurityContextOptions": """
        1 gmsaCredentialSpecName str!  2 gmsaCredentialSpec str!  3 runAsUserName str!
        4 hostProcess bool!""",
    "Sysctl": """
        1 name str!  2 value str!""",
    "SeccompProfile": """
        1 type str!  2 localhostProfile str!""",
    "AppArmorProfile": """
        1 type str!  2 localhostProfile str!""",
    "Affinity": """
        1 nodeAffinity NodeAffinity  2 podAffinity PodAffinity  3 podAntiAffinity PodAntiAffinity""",
    "NodeAffinity": """
        1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector
        2 preferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm""",
    "NodeSelector": """
        1 nodeSelectorTerms []NodeSelectorTerm""",
    "NodeSelectorTerm": """
        1 matchExpressions []NodeSelectorRequirement  2 matchFields []NodeSelectorRequirement""",
    "NodeSelectorRequirement": """
        1 key str!  2 operator str!  3 values []str""",
    "PreferredSchedulingTerm": """
        1 weight i32!  2 preference NodeSelectorTerm""",
    "PodAffinity": """
        1 requiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm
        2 preferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm""",
    "PodAntiAffinity": """
        1 requiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm
        2 preferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm""",
    "PodAffinityTerm": """
        1 labelSelector LabelSelector  2 namespaces []str  3 topologyKey str!
        4 namespaceSelector LabelSelector  5 matchLabelKeys []str  6 mismatchLabelKeys []str""",
    "WeightedPodAffinityTerm": """
        1 weight i32!  2 podAffinityTerm PodAffinityTerm""",
    "Toleration": """
        1 key str  2 operator str  3 value str  4 effect str  5 tolerationSeconds i64!""",
    "HostAlias": """
        1 ip str!  2 hostnames []str""",
    "PodDNSConfig": """
        1 nameservers []str  2 searches []str  3 options []PodDNSConfigOption""",
    "PodDNSConfigOption": """
        1 name str  2 value str!""",
    "PodReadinessGate": """
        1 conditionType str!""",
    "TopologySpreadConstraint": """
        1 maxSkew i32!  2 topologyKey str!  3 whenUnsatisfiable str!
        4 labelSelector LabelSelector  5 minDomains i32!  6 nodeAffinityPolicy str!
        7 nodeTaintsPolicy str!  8 matchLabelKeys []str""",
    "PodOS": """
        1 name str!""",
    "PodSchedulingGate": """
        1 name str!""",
    "PodResourceClaim": """
        1 name str!  3 resourceClaimName str!  4 resourceClaimTemplateName str!""",
    "PodSchedulingGroup": """
        1 podGroupName str!""",
    # ---- core/v1: containers ----
    "Container": """
        1 name str!  2 image str  3 command []str  4 args []str  5 workingDir str
        6 ports []ContainerPort  19 envFrom []EnvFromSource  7 env []EnvVar
        8 resources ResourceRequirements  23 resizePolicy []ContainerResizePolicy
        24 restartPolicy str!  25 restartPolicyRules []ContainerRestartRule
        9 volumeMounts []VolumeMount  21 volumeDevices []VolumeDevice  10 livenessProbe Probe
        11 readinessProbe Probe  22 startupProbe Probe  12 lifecycle Lifecycle
        13 terminationMessagePath str  20 terminationMessagePolicy str  14 imagePullPolicy str
        15 securityContext SecurityContext  16 stdin bool  17 stdinOnce bool  18 tty bool""",
    # EphemeralContainerCommon has exactly Container's fields, numbers and JSON names.
    "EphemeralContainer": """
        1 ephemeralContainerCommon Container^  2 targetContainerName str""",
    "ContainerPort": """
        1 name str  2 hostPort i32  3 containerPort i32!  4 protocol str  5 hostIP str""",
    "EnvFromSource": """
        1 prefix str  2 configMapRef ConfigMapEnvSource  3 secretRef SecretEnvSource""",
    "ConfigMapEnvSource": """
        1 localObjectReference LocalObjectReference^  2 optional bool!""",
    "SecretEnvSource": """
        1 localObjectReference LocalObjectReference^  2 optional bool!""",
    "EnvVar": """
        1 name str!  2 value str  3 valueFrom EnvVarSource""",
    "EnvVarSource": """
        1 fieldRef ObjectFieldSelector  2 resourceFieldRef ResourceFieldSelector
        3 configMapKeyRef ConfigMapKeySelector  4 secretKeyRef SecretKeySelector
        5 fileKeyRef FileKeySelector""",
    "ObjectFieldSelector": """
        1 apiVersion str  2 fieldPath str!""",
    "ResourceFieldSelector": """
        1 containerName str  2 resource str!  3 divisor quantity""",
    "ConfigMapKeySelector": """
        1 localObjectReference LocalObjectReference^  2 key str!  3 optional bool!""",
    "SecretKeySelector": """
        1 localObjectReference LocalObjectReference^  2 key str!  3 optional bool!""",
    "FileKeySelector": """
        1 volumeName str!  2 path str!  3 key str!  4 optional bool!""",
    "ResourceRequirements": """
        1 limits {quantity}  2 requests {quantity}  3 claims []ResourceClaim""",
    "ResourceClaim": """
        1 name str!  2 request str""",
    "ContainerResizePolicy": """
        1 resourceName str!  2 restartPolicy str!""",
    "ContainerRestartRule": """
        1 action str  2 exitCodes ContainerRestartRuleOnExitCodes""",
    "ContainerRestartRuleOnExitCodes": """
        1 operator str  2 values []i32""",
    "VolumeMount": """
        1 name str!  2 readOnly bool  7 recursiveReadOnly str!  3 mountPath str!  4 subPath str
        5 mountPropagation str!  6 subPathExpr str""",
    "VolumeDevice": """
        1 name str!  2 devicePath str!""",
    "Probe": """
        1 handler ProbeHandler^  2 initialDelaySeconds i32  3 timeoutSeconds i32
        4 periodSeconds i32  5 successThreshold i32  6 failureThreshold i32
        7 terminationGracePeriodSeconds i64!""",
    "ProbeHandler": """
        1 exec ExecAction  2 httpGet HTTPGetAction  3 tcpSocket TCPSocketAction  4 grpc GRPCAction""",
    "Lifecycle": """
        1 postStart LifecycleHandler  2 preStop LifecycleHandler  3 stopSignal str!""",
    "LifecycleHandler": """
        1 exec ExecAction  2 httpGet HTTPGetAction  3 tcpSocket TCPSocketAction
        4 sleep SleepAction""",
    "ExecAction": """
        1 command []str""",
    "HTTPGetAction": """
        1 path str  2 port intstr  3 host str  4 scheme str  5 httpHeaders []HTTPHeader""",
    "HTTPHeader": """
        1 name str!  2 value str!""",
    "TCPSocketAction": """
        1 port intstr  2 host str""",
    "GRPCAction": """
        1 port i32!  2 service str!""",
    "SleepAction": """
        1 seconds i64!""",
    "SecurityContext": """
        1 capabilities Capabilities  2 privileged bool!  3 seLinuxOptions SELinuxOptions
        10 windowsOptions WindowsSecurityContextOptions  4 runAsUser i64!  8 runAsGroup i64!
        5 runAsNonRoot bool!  6 readOnlyRootFilesystem bool!  7 allowPrivilegeEscalation bool!
        9 procMount str!  11 seccompProfile SeccompProfile  12 appArmorProfile AppArmorProfile""",
    "Capabilities": """
        1 add []str  2 drop []str""",
    # ---- core/v1: volumes ----
    "Volume": """
        1 name str!  2 volumeSource VolumeSource^""",
    "VolumeSource": """
        1 hostPath HostPathVolumeSource  2 emptyDir EmptyDirVolumeSource  3 gcePersistentDisk -
        4 awsElasticBlockStore -  5 gitRepo -  6 secret SecretVolumeSource  7 nfs NFSVolumeSource
        8 iscsi -  9 glusterfs -  10 persistentVolumeClaim PersistentVolumeClaimVolumeSource
        11 rbd -  12 flexVolume -  13 cinder -  14 cephfs -  15 flocker -
        16 downwardAPI DownwardAPIVolumeSource  17 fc -  18 azureFile -
        19 configMap ConfigMapVolumeSource  20 vsphereVolume -  21 quobyte -  22 azureDisk -
        23 photonPersistentDisk -  26 projected ProjectedVolumeSource  24 portworxVolume -
        25 scaleIO -  27 storageos -  28 csi CSIVolumeSource  29 ephemeral EphemeralVolumeSource
        30 image ImageVolumeSource""",
    "HostPathVolumeSource": """
        1 path str!  2 type str!""",
    "EmptyDirVolumeSource": """
        1 medium str  2 sizeLimit quantity""",
    "SecretVolumeSource": """
        1 secretName str  2 items []KeyToPath  3 defaultMode i32!  4 optional bool!""",
    "NFSVolumeSource": """
        1 server str!  2 path str!  3 readOnly bool""",
    "PersistentVolumeClaimVolumeSource": """
        1 claimName str!  2 readOnly bool""",
    "DownwardAPIVolumeSource": """
        1 items []DownwardAPIVolumeFile  2 defaultMode i32!""",
    "DownwardAPIVolumeFile": """
        1 path str!  2 fieldRef ObjectFieldSelector  3 resourceFieldRef ResourceFieldSelector
        4 mode i32!""",
    "ConfigMapVolumeSource": """
        1 localObjectReference LocalObjectReference^  2 items []KeyToPath  3 defaultMode i32!
        4 optional bool!""",
    "KeyToPath": """
        1 key str!  2 path str!  3 mode i32!""",
    "ProjectedVolumeSource": """
        1 sources []VolumeProjection  2 defaultMode i32!""",
    "VolumeProjection": """
        1 secret SecretProjection  2 downwardAPI DownwardAPIProjection
        3 configMap ConfigMapProjection  4 serviceAccountToken ServiceAccountTokenProjection
        5 clusterTrustBundle ClusterTrustBundleProjection
        6 podCertificate PodCertificateProjection""",
    "SecretProjection": """
        1 localObjectReference LocalObjectReference^  2 items []KeyToPath  4 optional bool!""",
    "DownwardAPIProjection": """
        1 items []DownwardAPIVolumeFile""",
    "ConfigMapProjection": """
        1 localObjectReference LocalObjectReference^  2 items []KeyToPath  4 optional bool!""",
    "ServiceAccountTokenProjection": """
        1 audience str  2 expirationSeconds i64!  3 path str!""",
    "ClusterTrustBundleProjection": """
        1 name str!  2 signerName str!  3 labelSelector LabelSelector  5 optional bool!
        4 path str!""",
    "PodCertificateProjection": """
        1 signerName str  2 keyType str  3 maxExpirationSeconds i32!  4 credentialBundlePath str
        5 keyPath str  6 certificateChainPath str  7 userAnnotations {str}""",
    "CSIVolumeSource": """
        1 driver str!  2 readOnly bool!  3 fsType str!  4 volumeAttributes {str}
        5 nodePublishSecretRef LocalObjectReference""",
    "EphemeralVolumeSource": """
        1 volumeClaimTemplate PersistentVolumeClaimTemplate""",
    "PersistentVolumeClaimTemplate": """
        1 metadata ObjectMeta  2 spec PersistentVolumeClaimSpec""",
    "PersistentVolumeClaimSpec": """
        1 accessModes []str  4 selector LabelSelector  2 resources VolumeResourceRequirements
        3 volumeName str  5 storageClassName str!  6 volumeMode str!
        7 dataSource TypedLocalObjectReference  8 dataSourceRef TypedObjectReference
        9 volumeAttributesClassName str!""",
    "VolumeResourceRequirements": """
        1 limits {quantity}  2 requests {quantity}""",
    "TypedLocalObjectReference": """
        1 apiGroup str!  2 kind str!  3 name str!""",
    "TypedObjectReference": """
        1 apiGroup str!  2 kind str!  3 name str!  4 namespace str!""",
    "ImageVolumeSource": """
        1 reference str  2 pullPolicy str""",
    # ---- core/v1: PodStatus ----
    "PodStatus": """
        17 observedGeneration i64  1 phase str  2 conditions []PodCondition  3 message str
        4 reason str  11 nominatedNodeName str  5 hostIP str  16 hostIPs []HostIP  6 podIP str
        12 podIPs []PodIP  7 startTime time  10 initContainerStatuses []ContainerStatus
        8 containerStatuses []ContainerStatus  9 qosClass str
        13 ephemeralContainerStatuses []ContainerStatus  14 resize str
        15 resourceClaimStatuses []PodResourceClaimStatus
        18 extendedResourceClaimStatus PodExtendedResourceClaimStatus
        19 allocatedResources {quantity}  20 resources ResourceRequirements
        21 nodeAllocatableResourceClaimStatuses []NodeAllocatableResourceClaimStatus""",
    "PodCondition": """
        1 type str!  7 observedGeneration i64  2 status str!  3 lastProbeTime time
        4 lastTransitionTime time  5 reason str  6 message str""",
    "HostIP": """
        1 ip str!""",
    "PodIP": """
        1 ip str!""",
    "ContainerStatus": """
        1 name str!  2 state ContainerState  3 lastState ContainerState  4 ready bool!
        5 restartCount i32!  6 image str!  7 imageID str!  8 containerID str  9 started bool!
        10 allocatedResources {quantity}  11 resources ResourceRequirements
        12 volumeMounts []VolumeMountStatus  13 user ContainerUser
        14 allocatedResourcesStatus []ResourceStatus  15 stopSignal str!""",
    "ContainerState": """
        1 waiting ContainerStateWaiting  2 running ContainerStateRunning
        3 terminated ContainerStateTerminated""",
    "ContainerStateWaiting": """
        1 reason str  2 message str""",
    "ContainerStateRunning": """
        1 startedAt time""",
    "ContainerStateTerminated": """
        1 exitCode i32!  2 signal i32  3 reason str  4 message str  5 startedAt time
        6 finishedAt time  7 containerID str""",
    "VolumeMountStatus": """
        1 name str!  2 mountPath str!  3 readOnly bool  4 recursiveReadOnly str!
        5 volumeStatus VolumeStatus""",
    "VolumeStatus": """
        1 image ImageVolumeStatus""",
    "ImageVolumeStatus": """
        1 imageRef str""",
    "ContainerUser": """
        1 linux LinuxContainerUser""",
    "LinuxContainerUser": """
        1 uid i64!  2 gid i64!  3 supplementalGroups []i64""",
    "ResourceStatus": """
        1 name str!  2 resources []ResourceHealth""",
    "ResourceHealth": """
        1 resourceID str!  2 health str  6 message str!""",
    "PodResourceClaimStatus": """
        1 name str!  2 resourceClaimName str!""",
    "PodExtendedResourceClaimStatus": """
        1 requestMappings []ContainerExtendedResourceRequest  2 resourceClaimName str!""",
    "ContainerExtendedResourceRequest": """
        1 containerName str!  2 resourceName str!  3 requestName str!""",
    "NodeAllocatableResourceClaimStatus": """
        1 resourceClaimName str!  2 containers []str  3 resources {quantity}""",
    # ---- apps/v1 ----
    "Deployment": """
        1 metadata ObjectMeta  2 spec DeploymentSpec  3 status DeploymentStatus""",
    "DeploymentSpec": """
        1 replicas i32!  2 selector LabelSelector  3 template PodTemplateSpec
        4 strategy DeploymentStrategy  5 minReadySeconds i32  6 revisionHistoryLimit i32!
        7 paused bool  9 progressDeadlineSeconds i32!""",
    "DeploymentStrategy": """
        1 type str  2 rollingUpdate RollingUpdateDeployment""",
    "RollingUpdateDeployment": """
        1 maxUnavailable intstr  2 maxSurge intstr""",
    "DeploymentStatus": """
        1 observedGeneration i64  2 replicas i32  3 updatedReplicas i32  7 readyReplicas i32
        4 availableReplicas i32  5 unavailableReplicas i32  9 terminatingReplicas i32!
        6 conditions []DeploymentCondition  8 collisionCount i32!""",
    "DeploymentCondition": """
        1 type str!  2 status str!  6 lastUpdateTime time  7 lastTransitionTime time  4 reason str
        5 message str""",
    "ReplicaSet": """
        1 metadata ObjectMeta  2 spec ReplicaSetSpec  3 status ReplicaSetStatus""",
    "ReplicaSetSpec": """
        1 replicas i32!  4 minReadySeconds i32  2 selector LabelSelector
        3 template PodTemplateSpec""",
    "ReplicaSetStatus": """
        1 replicas i32!  2 fullyLabeledReplicas i32  4 readyReplicas i32  5 availableReplicas i32
        7 terminatingReplicas i32!  3 observedGeneration i64  6 conditions []ReplicaSetCondition""",
    "ReplicaSetCondition": """
        1 type str!  2 status str!  3 lastTransitionTime time  4 reason str  5 message str""",
    # ---- batch/v1 ----
    "Job": """
        1 metadata ObjectMeta  2 spec JobSpec  3 status JobStatus""",
    "JobSpec": """
        1 parallelism i32!  2 completions i32!  3 activeDeadlineSeconds i64!
        11 podFailurePolicy PodFailurePolicy  16 successPolicy SuccessPolicy  7 backoffLimit i32!
        12 backoffLimitPerIndex i32!  13 maxFailedIndexes i32!  4 selector LabelSelector
        5 manualSelector bool!  6 template PodTemplateSpec  8 ttlSecondsAfterFinished i32!
        9 completionMode str!  10 suspend bool!  14 podReplacementPolicy str!  15 managedBy str!""",
    "PodFailurePolicy": """
        1 rules []PodFailurePolicyRule""",
    "PodFailurePolicyRule": """
        1 action str!  2 onExitCodes PodFailurePolicyOnExitCodesRequirement
        3 onPodConditions []PodFailurePolicyOnPodConditionsPattern""",
    "PodFailurePolicyOnExitCodesRequirement": """
        1 containerName str!  2 operator str!  3 values []i32""",
    "PodFailurePolicyOnPodConditionsPattern": """
        1 type str!  2 status str!""",
    "SuccessPolicy": """
        1 rules []SuccessPolicyRule""",
    "SuccessPolicyRule": """
        1 succeededIndexes str!  2 succeededCount i32!""",
    "JobStatus": """
        1 conditions []JobCondition  2 startTime time  3 completionTime time  4 active i32
        5 succeeded i32  6 failed i32  11 terminating i32!  7 completedIndexes str
        10 failedIndexes str!  8 uncountedTerminatedPods UncountedTerminatedPods  9 ready i32!""",
    "JobCondition": """
        1 type str!  2 status str!  3 lastProbeTime time  4 lastTransitionTime time  5 reason str
        6 message str""",
    "UncountedTerminatedPods": """
        1 succeeded []str  2 failed []str""",
    "CronJob": """
        1 metadata ObjectMeta  2 spec CronJobSpec  3 status CronJobStatus""",
    "CronJobSpec": """
        1 schedule str!  8 timeZone str!  2 startingDeadlineSeconds i64!  3 concurrencyPolicy str
        4 suspend bool!  5 jobTemplate JobTemplateSpec  6 successfulJobsHistoryLimit i32!
        7 failedJobsHistoryLimit i32!""",
    "JobTemplateSpec": """
        1 metadata ObjectMeta  2 spec JobSpec""",
    "CronJobStatus": """
        1 active []ObjectReference  4 lastScheduleTime time  5 lastSuccessfulTime time""",
    # ---- policy/v1 ----
    "PodDisruptionBudget": """
        1 metadata ObjectMeta  2 spec PodDisruptionBudgetSpec  3 status PodDisruptionBudgetStatus""",
    "PodDisruptionBudgetSpec": """
        1 minAvailable intstr  2 selector LabelSelector  3 maxUnavailable intstr
        4 unhealthyPodEvictionPolicy str!""",
    "PodDisruptionBudgetStatus": """
        1 observedGeneration i64  2 disruptedPods {time}  3 disruptionsAllowed i32!
        4 currentHealthy i32!  5 desiredHealthy i32!  6 expectedPods i32!
        7 conditions []Condition""",
    "Eviction": """
        1 metadata ObjectMeta  2 deleteOptions DeleteOptions""",
    # ---- rbac.authorization.k8s.io/v1 ----
    "Role": """
        1 metadata ObjectMeta  2 rules []PolicyRule""",
    "ClusterRole": """
        1 metadata ObjectMeta  2 rules []PolicyRule  3 aggregationRule AggregationRule""",
    "PolicyRule": """
        1 verbs []str  2 apiGroups []str  3 resources []str  4 resourceNames []str
        5 nonResourceURLs []str""",
    "AggregationRule": """
        1 clusterRoleSelectors []LabelSelector""",
    "RoleBinding": """
        1 metadata ObjectMeta  2 subjects []Subject  3 roleRef RoleRef""",
    "Subject": """
        1 kind str!  2 apiGroup str  3 name str!  4 namespace str""",
    "RoleRef": """
        1 apiGroup str!  2 kind str!  3 name str!""",
    # ---- coordination.k8s.io/v1 ----
    "Lease": """
        1 metadata ObjectMeta  2 spec LeaseSpec""",
    "LeaseSpec": """
        1 holderIdentity str!  2 leaseDurationSeconds i32!  3 acquireTime microtime
        4 renewTime microtime  5 leaseTransitions i32!  6 strategy str!  7 preferredHolder str!""",
    # ---- autoscaling/v1 ----
    "Scale": """
        1 metadata ObjectMeta  2 spec ScaleSpec  3 status ScaleStatus""",
    "ScaleSpec": """
        1 replicas i32""",
    "ScaleStatus": """
        1 replicas i32!  2 selector str""",
    # ---- apps/v1: DaemonSet ----
    "DaemonSet": """
        1 metadata ObjectMeta  2 spec DaemonSetSpec  3 status DaemonSetStatus""",
    "DaemonSetSpec": """
        1 selector LabelSelector  2 template PodTemplateSpec
        3 updateStrategy DaemonSetUpdateStrategy  4 minReadySeconds i32
        6 revisionHistoryLimit i32!""",
    "DaemonSetUpdateStrategy": """
        1 type str  2 rollingUpdate RollingUpdateDaemonSet""",
    "RollingUpdateDaemonSet": """
        1 maxUnavailable intstr  2 maxSurge intstr""",
    "DaemonSetStatus": """
        1 currentNumberScheduled i32!  2 numberMisscheduled i32!  3 desiredNumberScheduled i32!
        4 numberReady i32!  5 observedGeneration i64  6 updatedNumberScheduled i32
        7 numberAvailable i32  8 numberUnavailable i32  9 collisionCount i32!
        10 conditions []DaemonSetCondition""",
    "DaemonSetCondition": """
        1 type str!  2 status str!  3 lastTransitionTime time  4 reason str  5 message str""",
    # ---- scheduling.k8s.io/v1 ----
    "PriorityClass": """
        1 metadata ObjectMeta  2 value i32!  3 globalDefault bool  4 description str
        5 preemptionPolicy str!""",
    # ---- core/v1: PersistentVolume, PersistentVolumeClaim ----
    "PersistentVolume": """
        1 metadata ObjectMeta  2 spec PersistentVolumeSpec  3 status PersistentVolumeStatus""",
    "PersistentVolumeSpec": """
        1 capacity {quantity}  2 persistentVolumeSource PersistentVolumeSource^
        3 accessModes []str  4 claimRef ObjectReference  5 persistentVolumeReclaimPolicy str
        6 storageClassName str  7 mountOptions []str  8 volumeMode str!
        9 nodeAffinity VolumeNodeAffinity  10 volumeAttributesClassName str!""",
    "PersistentVolumeSource": """
        1 gcePersistentDisk -  2 awsElasticBlockStore -  3 hostPath HostPathVolumeSource
        4 glusterfs -  5 nfs NFSVolumeSource  6 rbd -  7 iscsi -  8 cinder -  9 cephfs -
        10 fc -  11 flocker -  12 flexVolume -  13 azureFile -  14 vsphereVolume -
        15 quobyte -  16 azureDisk -  17 photonPersistentDisk -  18 portworxVolume -
        19 scaleIO -  20 local LocalVolumeSource  21 storageos -
        22 csi CSIPersistentVolumeSource""",
    "LocalVolumeSource": """
        1 path str!  2 fsType str!""",
    "CSIPersistentVolumeSource": """
        1 driver str!  2 volumeHandle str!  3 readOnly bool  4 fsType str
        5 volumeAttributes {str}  6 controllerPublishSecretRef SecretReference
        7 nodeStageSecretRef SecretReference  8 nodePublishSecretRef SecretReference
        9 controllerExpandSecretRef SecretReference  10 nodeExpandSecretRef SecretReference""",
    "SecretReference": """
        1 name str  2 namespace str""",
    "VolumeNodeAffinity": """
        1 required NodeSelector""",
    "PersistentVolumeStatus": """
        1 phase str  2 message str  3 reason str  4 lastPhaseTransitionTime time""",
    "PersistentVolumeClaim": """
        1 metadata ObjectMeta  2 spec PersistentVolumeClaimSpec
        3 status PersistentVolumeClaimStatus""",
    "PersistentVolumeClaimStatus": """
        1 phase str  2 accessModes []str  3 capacity {quantity}
        4 conditions []PersistentVolumeClaimCondition  5 allocatedResources {quantity}
        7 allocatedResourceStatuses {str}  8 currentVolumeAttributesClassName str!
        9 modifyVolumeStatus ModifyVolumeStatus""",
    "PersistentVolumeClaimCondition": """
        1 type str!  2 status str!  3 lastProbeTime time  4 lastTransitionTime time
        5 reason str  6 message str""",
    "ModifyVolumeStatus": """
        1 targetVolumeAttributesClassName str  2 status str!""",
    # ---- storage.k8s.io/v1 ----
    "StorageClass": """
        1 metadata ObjectMeta  2 provisioner str!  3 parameters {str}  4 reclaimPolicy str!
        5 mountOptions []str  6 allowVolumeExpansion bool!  7 volumeBindingMode str!
        8 allowedTopologies []TopologySelectorTerm""",
    "TopologySelectorTerm": """
        1 matchLabelExpressions []TopologySelectorLabelRequirement""",
    "TopologySelectorLabelRequirement": """
        1 key str!  2 values []str""",
    "CSINode": """
        1 metadata ObjectMeta  2 spec CSINodeSpec""",
    "CSINodeSpec": """
        1 drivers []CSINodeDriver""",
    "CSINodeDriver": """
        1 name str!  2 nodeID str!  3 topologyKeys []str  4 allocatable VolumeNodeResources""",
    "VolumeNodeResources": """
        1 count i32!""",
    "CSIDriver": """
        1 metadata ObjectMeta  2 spec CSIDriverSpec""",
    "CSIDriverSpec": """
        1 attachRequired bool!  2 podInfoOnMount bool!  3 volumeLifecycleModes []str
        4 storageCapacity bool!  5 fsGroupPolicy str!  6 tokenRequests []TokenRequest
        7 requiresRepublish bool!  8 seLinuxMount bool!
        9 nodeAllocatableUpdatePeriodSeconds i64!  10 serviceAccountTokenInSecrets bool!
        11 preventPodSchedulingIfMissing bool!""",
    "TokenRequest": """
        1 audience str!  2 expirationSeconds i64!""",
    # ---- events.k8s.io/v1 ----
    "events.Event": """
        1 metadata ObjectMeta  2 eventTime microtime  3 series events.EventSeries
        4 reportingController str  5 reportingInstance str  6 action str  7 reason str
        8 regarding ObjectReference  9 related ObjectReference  10 note str  11 type str
        12 deprecatedSource EventSource  13 deprecatedFirstTimestamp time
        14 deprecatedLastTimestamp time  15 deprecatedCount i32""",
    "events.EventSeries": """
        1 count i32!  2 lastObservedTime microtime""",
}

# (apiVersion, kind) -> message. DeleteOptions is accepted under any apiVersion, as every API
# group registers it.
_KINDS: dict[tuple[str, str], str] = {
    ("v1", "Pod"): "Pod",
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "Service"): "Service",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Binding"): "Binding",
    ("v1", "Node"): "Node",
    ("v1", "Endpoints"): "Endpoints",
    ("v1", "Event"): "Event",
    ("apps/v1", "Deployment"): "Deployment",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("apps/v1", "DaemonSet"): "DaemonSet",
    ("v1", "PersistentVolume"): "PersistentVolume",
    ("v1", "PersistentVolumeClaim"): "PersistentVolumeClaim",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("storage.k8s.io/v1", "StorageClass"): "StorageClass",
    ("storage.k8s.io/v1", "CSINode"): "CSINode",
    ("storage.k8s.io/v1", "CSIDriver"): "CSIDriver",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",
    ("v1", "ResourceQuota"): "ResourceQuota",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "RoleBinding",
    ("coordination.k8s.io/v1", "Lease"): "Lease",
    ("autoscaling/v1", "Scale"): "Scale",
    ("events.k8s.io/v1", "Event"): "events.Event",
}
_ANY_VERSION_KINDS: dict[str, str] = {"DeleteOptions": "DeleteOptions"}

_SCALARS = frozenset({"str", "bytes", "bool", "i32", "i64"})
_SPECIALS = frozenset({"quantity", "intstr", "time", "microtime", "duration", "json"})
_VARINTS = frozenset({"bool", "i32", "i64"})

_ONE, _LIST, _MAP = "one", "list", "map"

_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32 = 0, 1, 2, 5
_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "start-group",
               4: "end-group", 5: "32-bit"}


@dataclass(frozen=True)
class _Field:
    number: int
    name: str
    kind: str  # a scalar, a special, a message name, or "-" for a rejected field
    card: str  # _ONE, _LIST or _MAP
    keep: bool = False  # keep the scalar when it is zero
    inline: bool = False  # merge the decoded message into the parent object
    wire: int = _WIRE_LEN  # the wire type of one value (element of a list, value of a map)


def _parse_table(table: dict[str, str]) -> dict[str, dict[int, _Field]]:
    """Turn :data:`_TABLE` into field objects, checking that it is consistent."""
    schema: dict[str, dict[int, _Field]] = {}
    for message, spec in table.items():
        tokens = spec.split()
        if len(tokens) % 3:
            raise ValueError(f"schema for {message}: expected NUMBER NAME TYPE triples")
        fields: dict[int, _Field] = {}
        for i in range(0, len(tokens), 3):
            number, name, kind = int(tokens[i]), tokens[i + 1], tokens[i + 2]
            keep = kind.endswith("!")
            inline = kind.endswith("^")
            kind = kind.rstrip("!^")
            card = _ONE
            if kind.startswith("[]"):
                card, kind = _LIST, kind[2:]
            elif kind.startswith("{") and kind.endswith("}"):
                card, kind = _MAP, kind[1:-1]
            if number in fields or number < 1:
                raise ValueError(f"schema for {message}: bad or duplicate field number {number}")
            if keep and (card != _ONE or kind not in _SCALARS):
                raise ValueError(f"schema for {message}.{name}: '!' applies to singular scalars")
            if inline and (card != _ONE or kind in _SCALARS or kind in _SPECIALS):
                raise ValueError(f"schema for {message}.{name}: '^' applies to messages")
            wire = _WIRE_VARINT if kind in _VARINTS else _WIRE_LEN
            fields[number] = _Field(number, name, kind, card, keep, inline, wire)
        schema[message] = fields
    for message, fields in schema.items():
        for field in fields.values():
            known = field.kind in _SCALARS or field.kind in _SPECIALS or field.kind in schema
            if not known and field.kind != "-":
                raise ValueError(f"schema for {message}.{field.name}: unknown type {field.kind}")
    return schema


_SCHEMA = _parse_table(_TABLE)


# -- the wire --------------------------------------------------------------------------------------

_MASK64 = (1 << 64) - 1


def _varint(data: memoryview, pos: int, where: str) -> tuple[int, int]:
    if pos < len(data) and data[pos] < 0x80:  # the common one-byte case
        return data[pos], pos + 1
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError(f"truncated varint in {where}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError(f"varint longer than 10 bytes in {where}")


def _fields(data: memoryview, where: str) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) for each field of a message: the one wire-type loop.

    Varints come as ints, the other wire types as views of their bytes.
    """
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = _varint(data, pos, where)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"invalid field number 0 in {where}")
        value: int | memoryview
        if wire == _WIRE_VARINT:
            value, pos = _varint(data, pos, where)
        elif wire in (_WIRE_I64, _WIRE_I32, _WIRE_LEN):
            if wire == _WIRE_LEN:
                size, pos = _varint(data, pos, where)
            else:
                size = 8 if wire == _WIRE_I64 else 4
            if pos + size > end:
                raise ProtobufError(f"truncated field {number} in {where}: {size} bytes "
                                    f"announced, {end - pos} left")
            value = data[pos:pos + size]
            pos += size
        else:
            name = _WIRE_NAMES.get(wire, "invalid")
            raise ProtobufError(f"unsupported wire type {wire} ({name}) for field {number} "
                                f"in {where}")
        yield number, wire, value


def _where(message: str, path: str) -> str:
    return f"message {message} (at {path})" if path else f"message {message}"


# -- values ----------------------------------------------------------------------------------------

def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _string(data: memoryview) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def _scalar(kind: str, value: int | memoryview) -> Any:
    """A scalar from its wire value, whose wire type the caller has checked."""
    if isinstance(value, int):
        if kind == "bool":
            return value != 0
        return _int32(value) if kind == "i32" else _int64(value)
    if kind == "str":
        return _string(value)
    return base64.b64encode(value).decode("ascii")


def _is_zero(value: Any) -> bool:
    return value is False or value == 0 or value == ""


def _expect(field: _Field, wire: int, where: str) -> None:
    if wire != field.wire:
        raise ProtobufError(f"field {field.number} ({field.name}) in {where} has wire type "
                            f"{_WIRE_NAMES.get(wire, wire)}, expected {_WIRE_NAMES[field.wire]}")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_ZERO_TIME_SECONDS = -62135596800  # 0001-01-01T00:00:00Z, Go's zero time.Time


def _timestamp(data: memoryview, micro: bool, path: str) -> str | None:
    """metav1.Time / MicroTime: RFC 3339 in UTC, or None (JSON null) for the zero time."""
    name = "MicroTime" if micro else "Time"
    if len(data) == 0:
        return None
    seconds = nanos = 0
    for number, wire, value in _fields(data, _where(name, path)):
        if number not in (1, 2) or not isinstance(value, int):
            raise ProtobufError(f"unsupported field {number} (wire type "
                                f"{_WIRE_NAMES.get(wire, wire)}) in {_where(name, path)}")
        if number == 1:
            seconds = _int64(value)
        else:
            nanos = _int32(value)
    micros = int(nanos / 1000) if micro else 0  # truncated toward zero, as Go does
    instant = seconds * 1_000_000 + micros
    if instant == _ZERO_TIME_SECONDS * 1_000_000:
        return None
    try:
        moment = _EPOCH + datetime.timedelta(microseconds=instant)
    except OverflowError:
        raise ProtobufError(f"time out of range in {_where(name, path)}: {seconds}s") from None
    # Formatted by hand: strftime's %Y does not zero-pad years before 1000 everywhere.
    text = (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
            f"{moment.minute:02d}:{moment.second:02d}")
    return f"{text}.{moment.microsecond:06d}Z" if micro else f"{text}Z"


def _go_fraction(value: int, digits: int) -> str:
    """``value / 10**digits`` as Go prints it: no trailing zeros, no point for an integer."""
    whole, frac = divmod(value, 10 ** digits)
    text = str(frac).rjust(digits, "0").rstrip("0")
    return f"{whole}.{text}" if text else str(whole)


def _go_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String()``: ``1h2m3.5s``, ``1.5ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < 1_000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_go_fraction(u, 3)}\u00b5s"
    if u < 1_000_000_000:
        return f"{sign}{_go_fraction(u, 6)}ms"
    seconds, frac = divmod(u, 1_000_000_000)
    text = _go_fraction((seconds % 60) * 1_000_000_000 + frac, 9) + "s"
    minutes = seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        if minutes // 60:
            text = f"{minutes // 60}h{text}"
    return sign + text


def _special(kind: str, data: memoryview, path: str) -> Any:
    """The JSON form of the apimachinery types with their own JSON encoding."""
    if kind == "time" or kind == "microtime":
        return _timestamp(data, kind == "microtime", path)
    message = {"quantity": "Quantity", "intstr": "IntOrString", "duration": "Duration",
               "json": "FieldsV1"}[kind]
    where = _where(message, path)
    values: dict[int, int | memoryview] = {}
    expected = {"quantity": {1: _WIRE_LEN}, "intstr": {1: _WIRE_VARINT, 2: _WIRE_VARINT,
                                                       3: _WIRE_LEN},
                "duration": {1: _WIRE_VARINT}, "json": {1: _WIRE_LEN}}[kind]
    for number, wire, value in _fields(data, where):
        if expected.get(number) != wire:
            raise ProtobufError(f"unsupported field {number} (wire type "
                                f"{_WIRE_NAMES.get(wire, wire)}) in {where}")
        values[number] = value
    if kind == "quantity":
        raw = values.get(1)
        return _string(raw) if isinstance(raw, memoryview) else "0"
    if kind == "duration":
        raw = values.get(1, 0)
        return _go_duration(_int64(raw) if isinstance(raw, int) else 0)
    if kind == "json":
        raw = values.get(1)
        if not isinstance(raw, memoryview) or len(raw) == 0:
            return None
        try:
            return json.loads(bytes(raw))
        except ValueError as exc:
            raise ProtobufError(f"invalid JSON in {where}: {exc}") from None
    kind_value = values.get(1, 0)
    if kind_value == 0:
        int_value = values.get(2, 0)
        return _int32(int_value) if isinstance(int_value, int) else 0
    if kind_value == 1:
        str_value = values.get(3)
        return _string(str_value) if isinstance(str_value, memoryview) else ""
    raise ProtobufError(f"invalid IntOrString type {kind_value} in {where}")


def _value(field: _Field, value: int | memoryview, path: str) -> Any:
    """One value of a field (one element of a repeated field), its wire type checked."""
    if field.kind in _SCALARS:
        return _scalar(field.kind, value)
    assert isinstance(value, memoryview)
    if field.kind in _SPECIALS:
        return _special(field.kind, value, path)
    return _decode_message(field.kind, value, path)


def _zero(field: _Field, path: str) -> Any:
    """The value of an absent map value: what Go's zero value marshals to."""
    if field.kind in _SCALARS:
        return {"str": "", "bytes": "", "bool": False, "i32": 0, "i64": 0}[field.kind]
    return _value(field, memoryview(b""), path)


def _map_entry(field: _Field, data: memoryview, message: str, path: str) -> tuple[str, Any]:
    where = f"{_where(message, path)} map {field.name} entry"
    key = ""
    values: list[int | memoryview] = []
    for number, wire, value in _fields(data, where):
        if number == 1:
            if not isinstance(value, memoryview) or wire != _WIRE_LEN:
                raise ProtobufError(f"map key with wire type {_WIRE_NAMES.get(wire, wire)} "
                                    f"in {where}")
            key = _string(value)
        elif number == 2:
            _expect(field, wire, where)
            values.append(value)
        else:
            raise ProtobufError(f"unsupported field {number} in {where}")
    entry_path = f"{path}.{field.name}[{key}]" if path else f"{field.name}[{key}]"
    if not values:
        return key, _zero(field, entry_path)
    if field.kind in _SCALARS:  # the last one wins
        return key, _value(field, values[-1], entry_path)
    merged = b"".join(bytes(v) for v in values if isinstance(v, memoryview))
    return key, _value(field, memoryview(merged), entry_path)


def _decode_message(message: str, data: memoryview, path: str) -> dict[str, Any]:
    """A message as a JSON object, interpreted by the schema table."""
    fields = _SCHEMA[message]
    where = _where(message, path)
    out: dict[str, Any] = {}
    singular: dict[int, list[memoryview]] = {}  # message-valued singular fields, merged
    for number, wire, value in _fields(data, where):
        field = fields.get(number)
        if field is None:
            raise ProtobufError(f"unsupported field {number} in {where}")
        if field.kind == "-":
            raise ProtobufError(f"unsupported field {number} ({field.name}) in {where}")
        if field.card == _MAP:
            if not isinstance(value, memoryview) or wire != _WIRE_LEN:
                raise ProtobufError(f"field {number} ({field.name}) in {where} has wire type "
                                    f"{_WIRE_NAMES.get(wire, wire)}, expected length-delimited")
            key, item = _map_entry(field, value, message, path)
            out.setdefault(field.name, {})[key] = item
        elif field.card == _LIST:
            items = out.setdefault(field.name, [])
            if field.kind in _VARINTS and isinstance(value, memoryview) and wire == _WIRE_LEN:
                pos = 0  # packed
                while pos < len(value):
                    raw, pos = _varint(value, pos, where)
                    items.append(_scalar(field.kind, raw))
            else:
                _expect(field, wire, where)
                here = f"{path}.{field.name}" if path else field.name
                items.append(_value(field, value, f"{here}[{len(items)}]"))
        elif field.kind in _SCALARS:
            _expect(field, wire, where)
            item = _scalar(field.kind, value)
            if field.keep or not _is_zero(item):
                out[field.name] = item
            else:
                out.pop(field.name, None)
        else:
            _expect(field, wire, where)
            assert isinstance(value, memoryview)
            if number not in singular and not field.inline:
                out[field.name] = None  # placeholder: keeps the order of first appearance
            singular.setdefault(number, []).append(value)
    for number, chunks in singular.items():
        field = fields[number]
        merged = chunks[0] if len(chunks) == 1 else memoryview(b"".join(map(bytes, chunks)))
        decoded = _value(field, merged, path if field.inline else
                         (f"{path}.{field.name}" if path else field.name))
        if field.inline:
            out.update(decoded)
        else:
            out[field.name] = decoded
    return out


# -- the envelope ----------------------------------------------------------------------------------

def _envelope(data: memoryview) -> tuple[str, str, memoryview]:
    """apiVersion, kind and raw object bytes of the runtime.Unknown that wraps every body."""
    api_version = kind = ""
    raw = memoryview(b"")
    strings: dict[int, str] = {}
    for number, wire, value in _fields(data, "message Unknown"):
        if number not in (1, 2, 3, 4) or not isinstance(value, memoryview) or wire != _WIRE_LEN:
            raise ProtobufError(f"unsupported field {number} (wire type "
                                f"{_WIRE_NAMES.get(wire, wire)}) in message Unknown")
        if number == 1:
            for sub, sub_wire, sub_value in _fields(value, "message TypeMeta"):
                if sub not in (1, 2) or not isinstance(sub_value, memoryview):
                    raise ProtobufError(f"unsupported field {sub} (wire type "
                                        f"{_WIRE_NAMES.get(sub_wire, sub_wire)}) in "
                                        "message TypeMeta")
                if sub == 1:
                    api_version = _string(sub_value)
                else:
                    kind = _string(sub_value)
        elif number == 2:
            raw = value
        else:
            strings[number] = _string(value)
    if strings.get(3):
        raise ProtobufError(f"unsupported contentEncoding {strings[3]!r} in message Unknown")
    content_type = strings.get(4, "")
    if content_type and not content_type.startswith(MEDIA_TYPE):
        raise ProtobufError(f"unsupported contentType {content_type!r} in message Unknown")
    return api_version, kind, raw


def decode(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """Decode a Kubernetes protobuf body into the JSON object a JSON client would have sent.

    The result carries ``kind`` and ``apiVersion`` from the envelope's ``typeMeta``.
    Raises :class:`ProtobufError` for a body without the ``k8s\\x00`` magic, malformed or
    truncated protobuf, an unsupported kind, or any field the schema does not know.
    """
    data = memoryview(body).cast("B")
    if bytes(data[:len(MAGIC)]) != MAGIC:
        raise ProtobufError("not a Kubernetes protobuf body: it does not start with the "
                            "magic bytes 'k8s\\x00'")
    api_version, kind, raw = _envelope(data[len(MAGIC):])
    message = _KINDS.get((api_version, kind)) or _ANY_VERSION_KINDS.get(kind)
    if message is None:
        raise ProtobufError(f"unsupported kind {kind!r} (apiVersion {api_version!r}): "
                            "no protobuf schema for it")
    return {"kind": kind, "apiVersion": api_version, **_decode_message(message, raw, "")}
