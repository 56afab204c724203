"""SARIF 2.1.0's requirements on what kernel-lsp writes, checked without the schema file."""

from __future__ import annotations

import os


def sarif_problems(log: dict) -> list[str]:
    """What SARIF 2.1.0 requires of the parts kernel-lsp writes (the OASIS schema's license does
    not let us ship it; with KERNEL_LSP_SARIF_SCHEMA naming a copy, the test below also validates
    against it): required properties, types, enums, rule references, location shapes."""
    problems: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    def location(loc: dict, where: str) -> None:
        phys = loc.get("physicalLocation", {})
        uri = phys.get("artifactLocation", {}).get("uri", "")
        need(isinstance(uri, str) and uri != "", f"{where}: artifactLocation.uri")
        need(" " not in uri and "\\" not in uri, f"{where}: uri {uri!r} is not a uri-reference")
        need(not os.path.isabs(uri), f"{where}: uri {uri!r} is a file path, not relative")
        region = phys.get("region", {})
        need(isinstance(region.get("startLine"), int) and region["startLine"] >= 1, f"{where}: startLine")
        need(
            isinstance(region.get("startColumn"), int) and region["startColumn"] >= 1, f"{where}: startColumn"
        )
        if "endColumn" in region:
            need(region["endColumn"] > region["startColumn"], f"{where}: endColumn")

    need(log.get("version") == "2.1.0", "version")
    need(str(log.get("$schema", "")).endswith("sarif-2.1.0.json"), "$schema")
    for run in log.get("runs", []):
        driver = run["tool"]["driver"]
        need(isinstance(driver.get("name"), str) and driver["name"] != "", "driver.name")
        ids = [r.get("id") for r in driver.get("rules", [])]
        need(len(ids) == len(set(ids)), "rule ids are unique")
        for rule in driver.get("rules", []):
            need(isinstance(rule.get("id"), str), "rule.id")
            text = rule.get("shortDescription", {}).get("text")
            need(
                isinstance(text, str) and text != "" and text != rule.get("id"),
                f"rule {rule.get('id')}: text",
            )
        need(isinstance(run.get("properties", {}), dict), "run.properties")
        for i, result in enumerate(run.get("results", [])):
            where = f"results[{i}]"
            need(result.get("ruleId") in ids, f"{where}: ruleId {result.get('ruleId')!r} has no rule")
            if "ruleIndex" in result:
                need(ids[result["ruleIndex"]] == result.get("ruleId"), f"{where}: ruleIndex")
            need(result.get("level") in {"none", "note", "warning", "error"}, f"{where}: level")
            need(isinstance(result.get("message", {}).get("text"), str), f"{where}: message.text")
            for loc in result.get("locations", []):
                location(loc, where)
            related_ids = [r.get("id") for r in result.get("relatedLocations", [])]
            need(len(related_ids) == len(set(related_ids)), f"{where}: relatedLocations ids unique")
            for r in result.get("relatedLocations", []):
                need(isinstance(r.get("id"), int) and r["id"] >= 0, f"{where}: relatedLocations id")
                need(bool(r.get("message", {}).get("text")), f"{where}: relatedLocations message")
                location(r, f"{where} related")
    return problems
