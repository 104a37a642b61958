"""Bundles of runs to share between labs: `format` (the file and its manifest), `export`,
`validate` (reading an untrusted bundle) and `merge` (importing by uid). The public names are
here."""

from store.bundle.export import export_bundle
from store.bundle.format import (
    DEFAULT_LIMITS,
    SUFFIX,
    BundleError,
    BundleLimits,
    ImportResult,
    Manifest,
)
from store.bundle.merge import import_bundle
from store.bundle.validate import read_manifest, verify_bundle

__all__ = [
    "DEFAULT_LIMITS",
    "SUFFIX",
    "BundleError",
    "ImportResult",
    "BundleLimits",
    "Manifest",
    "export_bundle",
    "import_bundle",
    "read_manifest",
    "verify_bundle",
]
