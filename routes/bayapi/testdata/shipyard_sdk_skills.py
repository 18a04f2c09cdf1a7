"""Drives the skills lifecycle through Shipyard Neo's own Python SDK (shipyard_neo) against a sandgate gateway.

Run by TestSkillsWithShipyardSDK; BAY_URL and BAY_KEY name the gateway. Every step asserts what the SDK parsed.
"""
import asyncio
import os

from shipyard_neo import BayClient


async def main() -> None:
    async with BayClient(endpoint_url=os.environ["BAY_URL"], access_token=os.environ["BAY_KEY"]) as client:
        sb = await client.create_sandbox(profile="python-default", ttl=600)
        try:
            first = await sb.python.exec("print('step1')", tags="etl")
            assert first.success and first.execution_id.startswith("exec-"), first
            builtin = await sb.filesystem.read_file("skills/python-sandbox/SKILL.md")
            assert builtin.startswith("---\nname: python-sandbox\n"), builtin[:80]

            payload = await client.skills.create_payload(payload={"commands": ["open about:blank"]}, kind="candidate_payload")
            assert payload.payload_ref.startswith("blob:"), payload
            got = await client.skills.get_payload(payload.payload_ref)
            assert got.kind == "candidate_payload" and got.payload == {"commands": ["open about:blank"]}, got

            cand = await client.skills.create_candidate(
                skill_key="etl-loader", source_execution_ids=[first.execution_id], payload_ref=payload.payload_ref,
                summary="ETL loader", preconditions={"runtime": "python"})
            assert cand.status.value == "draft" and cand.source_execution_ids == [first.execution_id], cand
            ev = await client.skills.evaluate_candidate(cand.id, passed=True, score=0.95, benchmark_id="b1", report="ok")
            assert ev.passed and ev.candidate_id == cand.id, ev
            v1 = await client.skills.promote_candidate(cand.id, stage="stable")
            assert v1.version == 1 and v1.stage.value == "stable" and v1.is_active, v1

            second = await sb.python.exec("print('step2')", tags="etl")
            cand2 = await client.skills.create_candidate(skill_key="etl-loader", source_execution_ids=[second.execution_id])
            await client.skills.evaluate_candidate(cand2.id, passed=True)
            v2 = await client.skills.promote_candidate(cand2.id, stage="canary", upgrade_of_release_id=v1.id)
            assert v2.version == 2 and v2.upgrade_of_release_id == v1.id, v2

            await sb.python.exec("print('with v2')", tags=f"release:{v2.id}")
            health = await client.skills.get_release_health(v2.id)
            assert health.samples == 1 and health.success_rate == 1.0 and health.healthy, health
            injected = await sb.filesystem.read_file("skills/etl-loader/SKILL.md")
            assert 'name: "etl-loader"' in injected and "release_id: \"%s\"" % v2.id in injected, injected[:200]

            active = await client.skills.list_releases(skill_key="etl-loader", active_only=True)
            assert active.total == 1 and active.items[0].id == v2.id, active
            back = await client.skills.rollback_release(v2.id)
            assert back.version == 3 and back.rollback_of == v2.id and back.candidate_id == cand.id, back
            cands = await client.skills.list_candidates(skill_key="etl-loader")
            assert sorted(c.status.value for c in cands.items) == ["promoted", "rolled_back"], cands
            deleted = await client.skills.delete_release(v2.id, reason="regressed")
            assert deleted["delete_reason"] == "regressed", deleted
            await client.skills.delete_candidate(cand2.id)
            print("SDK_SKILLS_OK")
        finally:
            await sb.delete()


asyncio.run(main())
