"""Offline Isaac Lab assets for the cartpole tasks: ``python -m isaaclab_mgpu.tools.isaac_assets DIR``.

Isaac Lab loads the cartpole robot and the ground plane from its asset root at run time
(``{ISAACSIM_ASSET_ROOT}/Isaac/IsaacLab/...``), normally a remote server that CI machines and many
clusters cannot reach. This module rebuilds the two files those tasks need with ``pxr`` (usd-core,
installed with Isaac Lab): :data:`ROBOT`, environment 0's ``Robot`` subtree of the golden USD
stage of the cartpole scene the isaaclab wheel ships (:data:`GOLDEN`), re-rooted at ``/cartpole``;
and :data:`GROUND`, a small stage with the prims Isaac Lab's ``spawn_ground_plane`` touches.

Then point Isaac Lab at the folder: ``export ISAACSIM_ASSET_ROOT=DIR``. The command prints that line.
Run it with the Python that has Isaac Lab (3.12). Rebuilding is idempotent; files are replaced.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: Paths under the asset root, as Isaac Lab 3's configs name them.
ROBOT = "Isaac/IsaacLab/Robots/Classic/Cartpole/cartpole.usd"
GROUND = "Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda"
GOLDEN = "source/isaaclab_tasks/test/golden_stages/cartpole/newton-isaacsim_rtx_renderer-rgb.usda"
#: Where the robot sits in a golden stage.
GOLDEN_ROBOT = "/World/envs/env_0/Robot"


def golden_stage() -> Path:
    """The wheel's golden cartpole stage; raise FileNotFoundError naming it when absent."""
    import isaaclab

    path = Path(isaaclab.__file__).resolve().parent / GOLDEN
    if not path.is_file():
        raise FileNotFoundError(f"{path}: this isaaclab wheel has no golden cartpole stage")
    return path


def build_robot(root: Path, golden: Path) -> Path:
    """Write the cartpole robot USD under ``root`` from ``golden``; return its path."""
    from pxr import Sdf

    src = Sdf.Layer.FindOrOpen(str(golden))
    out = root / ROBOT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    dst = Sdf.Layer.CreateNew(str(out))
    dst.pseudoRoot.SetInfo("metersPerUnit", 1.0)
    dst.pseudoRoot.SetInfo("kilogramsPerUnit", 1.0)
    dst.pseudoRoot.SetInfo("upAxis", "Z")
    # The instanceable visuals/collisions reference these root prototypes inside the same layer.
    for prim in src.rootPrims:
        if prim.name.startswith("Flattened_Prototype"):
            Sdf.CopySpec(src, prim.path, dst, prim.path)
    Sdf.CopySpec(src, GOLDEN_ROBOT, dst, "/cartpole")
    dst.defaultPrim = "cartpole"
    dst.Save()
    return out


def build_ground(root: Path) -> Path:
    """Write a minimal ground-plane stage under ``root``; return its path."""
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

    out = root / GROUND
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    stage = Usd.Stage.CreateNew(str(out))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    top = UsdGeom.Xform.Define(stage, "/GroundPlane")
    stage.SetDefaultPrim(top.GetPrim())
    env = UsdGeom.Xform.Define(stage, "/GroundPlane/Environment")
    env.AddScaleOp().Set(Gf.Vec3d(1.0, 1.0, 1.0))  # spawn_ground_plane rescales this
    mesh = UsdGeom.Mesh.Define(stage, "/GroundPlane/Environment/Geometry")
    half = 50.0
    mesh.CreatePointsAttr([(-half, -half, 0), (half, -half, 0), (half, half, 0), (-half, half, 0)])
    mesh.CreateFaceVertexCountsAttr([4])
    mesh.CreateFaceVertexIndicesAttr([0, 1, 2, 3])
    mesh.CreateExtentAttr([(-half, -half, 0), (half, half, 0)])
    st = UsdGeom.PrimvarsAPI(mesh).CreatePrimvar(
        "st", Sdf.ValueTypeNames.TexCoord2fArray, UsdGeom.Tokens.vertex
    )
    st.Set([(-1, -1), (1, -1), (1, 1), (-1, 1)])
    plane = UsdGeom.Plane.Define(stage, "/GroundPlane/CollisionPlane")
    plane.CreateAxisAttr(UsdGeom.Tokens.z)
    plane.CreatePurposeAttr(UsdGeom.Tokens.guide)
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())
    stage.GetRootLayer().Save()
    return out


def build(root: Path) -> list[Path]:
    """Build every file under ``root``; return their paths."""
    root = Path(root).resolve()
    return [build_robot(root, golden_stage()), build_ground(root)]


def main(argv: list[str] | None = None) -> int:
    """Command entry point: build the assets into the folder given, print the export line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("usage: python -m isaaclab_mgpu.tools.isaac_assets DIR\n")
        return 2
    try:
        paths = build(Path(args[0]))
    except (ImportError, FileNotFoundError) as exc:
        sys.stderr.write(f"isaaclab_mgpu.tools.isaac_assets: error: {exc} (run it with Isaac Lab's Python)\n")
        return 2
    for path in paths:
        sys.stderr.write(f"wrote {path}\n")
    print(f"export ISAACSIM_ASSET_ROOT={Path(args[0]).resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
