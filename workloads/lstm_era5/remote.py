"""Zarr stores opened through a metered fsspec filesystem: every byte a read fetches is counted.

The meter sits in the filesystem's own whole-object read (`_cat_file` of an async filesystem
such as gcsfs, `cat_file` of a synchronous one such as the local disk), which is what zarr
calls for each chunk and each metadata object: what the source really sent, as stored
(compressed), one request per read. gs:// goes through gcsfs' HTTP JSON API class
(`gcsfs.core.GCSFileSystem`), anonymously: gcsfs' default class (gcsfs ≥ 2025.10) first asks
a gRPC storage-control API for the bucket's layout on every operation, which an anonymous
reader cannot call (and an emulator does not serve) and which is not cached when it fails.
"""

from __future__ import annotations

import os
import threading
import time

from stbench.contract import require

GS = ("gs://", "gcs://")


class Meter:
    """Bytes and object reads fetched through one opened store, from several threads (dask's
    workers, gcsfs' event loop), and when the store was opened."""

    def __init__(self):
        self._lock = threading.Lock()
        self.bytes = 0
        self.reads = 0
        self.opened = time.perf_counter()

    def add(self, n: int) -> None:
        with self._lock:
            self.bytes += n
            self.reads += 1


def _metered(cls, meter: Meter):
    """A subclass of the filesystem class whose whole-object read counts into `meter`."""
    if cls.async_impl:

        async def _cat_file(self, path, start=None, end=None, **kwargs):
            out = await cls._cat_file(self, path, start=start, end=end, **kwargs)
            meter.add(len(out))
            return out

        body = {"_cat_file": _cat_file}
    else:

        def cat_file(self, path, start=None, end=None, **kwargs):
            out = cls.cat_file(self, path, start=start, end=end, **kwargs)
            meter.add(len(out))
            return out

        body = {"cat_file": cat_file}
    return type(f"Metered{cls.__name__}", (cls,), body)


def filesystem(url: str, meter: Meter, asynchronous: bool = True):
    """(the metered filesystem for url, the path inside it). Local paths use fsspec's local
    filesystem, wrapped to look asynchronous for zarr."""
    import fsspec

    if url.startswith(GS):
        require("gcsfs", f"reading {url}", ValueError)
        from gcsfs.core import GCSFileSystem as cls  # the HTTP JSON API (see the module's note)

        options = {
            "token": "anon"
        }  # the public ARCO bucket; STORAGE_EMULATOR_HOST is honoured by gcsfs
    else:
        protocol = url.split("://")[0] if "://" in url else "file"
        cls, options = fsspec.get_filesystem_class(protocol), {}
    fs = _metered(cls, meter)(
        skip_instance_cache=True,
        **options,
        **({"asynchronous": True} if cls.async_impl and asynchronous else {}),
    )
    path = cls._strip_protocol(url if "://" in url else os.path.abspath(url))
    if asynchronous and not cls.async_impl:
        from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

        fs = AsyncFileSystemWrapper(fs, asynchronous=True)
    return fs, path


def open_store(url: str, meter: Meter):
    """A read-only zarr store at url (gs://, s3://, http(s)://, or a local path) whose reads
    count into meter."""
    from zarr.storage import FsspecStore

    fs, path = filesystem(url, meter)
    return FsspecStore(fs, read_only=True, path=path)


def endpoint_host(url: str) -> tuple[str, int]:
    """(host, port) a URL's reads go to; gs:// honours STORAGE_EMULATOR_HOST as gcsfs does."""
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "")
    if url.startswith(GS) and emulator not in ("", "default"):
        hostport = emulator.split("://")[-1].split("/")[0]
        host, _, port = hostport.rpartition(":")
        return (
            (host, int(port)) if host else (hostport, 443 if emulator.startswith("https") else 80)
        )
    if url.startswith(GS):
        return "storage.googleapis.com", 443
    hostport = url.split("/")[2]
    host, _, port = hostport.rpartition(":")
    return (
        (host, int(port))
        if host and port.isdigit()
        else (hostport, 80 if url.startswith("http://") else 443)
    )
