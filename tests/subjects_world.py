"""A deployment with subjects on moto, and what an operator with the bucket, the table
and the KMS key could read from it: shared by the saver's and the store's tests."""

from __future__ import annotations

from typing import Any

import boto3
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from langgraph_s3 import AsyncS3Saver, AsyncS3Store
from langgraph_s3.core import sealing
from langgraph_s3.manifest.objects import codec
from langgraph_s3.testing import MotoServer, unique_names
from langgraph_s3.testing.graphs import chat_graph, norm


class World:
    """One deployment with subjects on moto: its names, a KMS key, raw clients."""

    def __init__(self, moto: MotoServer, manifest: str = "dynamodb") -> None:
        self.moto, self.names = moto, dict(unique_names())
        self.manifest = manifest
        """Where the manifest lives: its table, or the bucket (``manifest="s3"``)."""
        if manifest == "s3":
            self.names = {"bucket": self.names["bucket"], "manifest": "s3"}
        kw = {"endpoint_url": moto.url, "region_name": "us-east-1"}
        self.s3, self.ddb, self.kms = (boto3.client(s, **kw) for s in ("s3", "dynamodb", "kms"))
        self.key = self.kms.create_key(Description="subjects")["KeyMetadata"]["KeyId"]
        self.savers: list[AsyncS3Saver] = []
        self.stores: list[AsyncS3Store] = []

    def saver(self, **kw: Any) -> AsyncS3Saver:
        s = AsyncS3Saver(
            endpoint_url=self.moto.url,
            subjects="user_id",
            kms_key=self.key,
            index_metadata=["user_id"],
            **self.names,
            **kw,
        )
        self.savers.append(s)
        return s

    def store(self, **kw: Any) -> AsyncS3Store:
        """A store of the same deployment (its URL's bucket, prefix and table): its
        namespaces' subjects are their label 1 (``("users", "alice", ...)``)."""
        s = AsyncS3Store(
            endpoint_url=self.moto.url,
            subjects=1,
            kms_key=self.key,
            **self.names,
            **kw,
        )
        self.stores.append(s)
        return s

    async def aclose(self) -> None:
        for s in self.savers:
            await s.aclose()
        for store in self.stores:
            await store.aclose()

    def bodies(self) -> list[tuple[str, bytes]]:
        """Every version of every object, as the bucket holds it."""
        out = []
        pages = self.s3.get_paginator("list_object_versions").paginate(Bucket=self.names["bucket"])
        for page in pages:
            for v in page.get("Versions", []):
                got = self.s3.get_object(
                    Bucket=self.names["bucket"], Key=v["Key"], VersionId=v["VersionId"]
                )
                out.append((v["Key"], got["Body"].read()))
        return out

    def items(self) -> list[dict[str, Any]]:
        """Every item the manifest holds now (in the bucket: each item's newest version)."""
        if self.manifest == "s3":
            out = []
            for key in self._heads():
                body = self.s3.get_object(Bucket=self.names["bucket"], Key=key)["Body"].read()
                version = codec.decode(body, key)
                image = version.image if version.intent is None else version.intent.pre
                if image:
                    out.append(_plain_bytes(image))
            return out
        pages = self.ddb.get_paginator("scan").paginate(TableName=self.names["table"])
        return [i for p in pages for i in p["Items"]]

    def _heads(self) -> list[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.names["bucket"], Prefix="manifest/i/"
        )
        keys = [o["Key"] for p in pages for o in p.get("Contents", [])]
        return [k for n, k in enumerate(keys) if n == 0 or keys[n - 1][:-12] != k[:-12]]

    def every_image(self) -> list[dict[str, Any]]:
        """Every image the manifest still holds anywhere: in the bucket, every version
        of every item (each object version, both sides of an intent)."""
        if self.manifest != "s3":
            return self.items()
        images: list[dict[str, Any]] = []
        for key, body in self.bodies():
            if key.startswith("manifest/i/"):
                version = codec.decode(body, key)
                x = version.intent
                for image in (version.image, x and x.pre, x and x.post):
                    if image:
                        images.append(_plain_bytes(image))
        return images

    def set_attribute(self, item: dict[str, Any], name: str, value: dict[str, Any]) -> None:
        """Change one attribute of a manifest item as someone with write access to the
        table (or the bucket: a next version of the item) could."""
        if self.manifest != "s3":
            self.ddb.update_item(
                TableName=self.names["table"],
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET #n = :v",
                ExpressionAttributeNames={"#n": name},
                ExpressionAttributeValues={":v": value},
            )
            return
        from langgraph_s3.manifest import deployment_key
        from langgraph_s3.manifest.objects import keys as object_keys

        bucket = self.names["bucket"]
        strip = deployment_key(bucket, "")
        prefix = object_keys.item_prefix("manifest/", strip, item["pk"]["S"], item["sk"]["S"])
        head = self.s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)["Contents"][0]
        seq = object_keys.seq_of(head["Key"]) + 1
        body = codec.encode(codec.Version(seq, {**item, name: value}, "tamper"))
        self.s3.put_object(Bucket=bucket, Key=object_keys.version_key(prefix, seq), Body=body)

    def plaintext(self, words: str) -> list[str]:
        """Where ``words`` can be read in the bucket or the table, as stored."""
        raw = words.encode()
        found = [k for k, b in self.bodies() if raw in b or raw in inflated(b)]
        found += [f"item {i['pk']['S']} {i['sk']['S']}" for i in self.items() if words in repr(i)]
        return found


def _plain_bytes(image: dict[str, Any]) -> dict[str, Any]:
    """An image's binary values as boto3 reads DynamoDB's (``{"B": bytes}``)."""
    return {k: {"B": bytes(v["B"])} if "B" in v else v for k, v in image.items()}


def inflated(body: bytes) -> bytes:
    """A body's zstd frames inflated (an operator would try that too)."""
    import zstandard

    for at in (0, 2):
        try:
            return zstandard.ZstdDecompressor().decompress(body[at:], max_output_size=1 << 24)
        except zstandard.ZstdError:
            continue
    return b""


def remaining_keys(world: World) -> list[bytes]:
    """Every data key the table still wraps, unwrapped with the deployment's KMS key (an
    operator with full access could do as much)."""
    out = []
    for item in world.every_image():
        if "wrapped" not in item or "kid" not in item:
            continue
        pk = item["pk"]["S"]
        token = pk.rsplit("/", 1)[1]
        kid = bytes(item["kid"]["B"]).hex()
        if token == "~secret":
            deployment = pk[: -len("~subjects/~secret")]
            context = {"langgraph-s3:token-secret": deployment, "langgraph-s3:key": kid}
        else:
            context = {"langgraph-s3:subject": token, "langgraph-s3:key": kid}
        blob = bytes(item["wrapped"]["B"])
        try:
            out.append(
                world.kms.decrypt(CiphertextBlob=blob, EncryptionContext=context)["Plaintext"]
            )
        except Exception:
            continue
    assert out  # the secret and bob's key at least
    return out


def opens(keys: list[bytes], body: bytes, token: str, thread: str) -> bool:
    """Whether any of ``keys`` opens ``body``, bound as the library binds it."""
    head = body[: len(sealing.MAGIC) + 16]
    nonce = body[len(head) : len(head) + 12]
    aad = head + f"{token}|{thread}".encode()
    for key in keys:
        try:
            AESGCM(key).decrypt(nonce, body[len(head) + 12 :], aad)
            return True
        except InvalidTag:
            continue
    return False


def opens_item(keys: list[bytes], body: bytes, rel: str) -> bool:
    """Whether any of ``keys`` opens a store item's body (``rel``: its key under the
    store's root), bound as the library binds it."""
    named = sealing.named_subject(body)
    assert named is not None
    token, _, sealed = named
    return opens(keys, sealed, token, f"store|{rel}")


def alice(thread: str = "a1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": "alice"}}


def bob(thread: str = "b1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": "bob"}}


async def chat(saver: AsyncS3Saver, config: dict[str, Any], words: str, turns: int = 3) -> Any:
    """``turns`` turns of the test chat on ``config``'s thread: its last state, normalized."""
    graph = chat_graph().compile(checkpointer=saver)
    for i in range(turns):
        out = await graph.ainvoke({"messages": [("user", f"{words} {i}")]}, config)
    return norm(out)
