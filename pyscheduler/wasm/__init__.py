"""WebAssembly scheduling fragments: runtimes (``vm``), the host side of the fragment ABI
(``abi``), loaded fragments (``fragment``), fetching modules (``storage``), the
``WsspSchedulerConfiguration`` resource (``resource``) and the set of serving fragments
(``manager``). The ABI itself is written down in ``fragments/ABI.md``."""
