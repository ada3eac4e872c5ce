"""How `data synth` replaces a node's dataset: written aside, then switched in (pure: file names and the
node's shell script).

The files go up beside the dataset under names of their own (``uploads``): the archive, the new listing,
an incomplete manifest and the complete one. ``write_script`` then, in the dataset's directory:

1. refuses (exit ``REFUSED``, nothing changed) a listing that names a path `data synth` does not write
   (``synth.LISTED_PATH``: no ``..``, no absolute path), and any file, link or device under ``train/``,
   ``val/`` or ``tfrecords/`` that the listing does not name (someone else's file, or a symlink that would
   lead a removal out of the dataset);
2. unpacks the archive into a directory aside (a full disk or a cut archive stops here: the old dataset
   is untouched and still passes a run's check);
3. puts the incomplete manifest in place (one rename), so from here until the last step a run refuses the
   directory and the next synth rewrites it;
4. removes the files the old listing names, and their directories where that left them empty;
5. moves the new files in (a rename per top directory; hard links where one is still there), then the
   new listing, then the complete manifest (one rename: the switch).

Whatever stops the script (a refusal, a failure) removes what was put aside. An interruption anywhere
leaves either the old dataset under its own manifest, or an incomplete one.
"""

from __future__ import annotations

import shlex

from clusterctl.data.synth import INCOMPLETE, LISTED_PATH, LISTING_NAME, MANIFEST_NAME, Manifest
from clusterctl.data.tfrecord import SHARDS_DIR

_STAGE = ".clusterctl-synth"
ARCHIVE = f"{_STAGE}.tar"
UNPACKED = f"{_STAGE}.new"
NEW_LISTING = f"{_STAGE}.files"
PENDING = f"{_STAGE}.incomplete.json"
COMPLETE = f"{_STAGE}.manifest.json"
_FOUND, _LISTED = f"{_STAGE}.found", f"{_STAGE}.listed"
# The script's exit status when it refuses (nothing changed): bad input, not a failed write.
REFUSED = 3
# The message prefix of a refusal on the script's stderr.
REFUSAL = "clusterctl refuses: "
_TOPS = ("train", "val", SHARDS_DIR)


def uploads(manifest: Manifest, paths: list[str]) -> dict[str, bytes]:
    """The small files to upload into the dataset's directory before ``write_script`` (beside the archive,
    ``ARCHIVE``): the new listing, the incomplete and the complete manifest."""
    pending = Manifest(manifest.spec, manifest.files, manifest.bytes, INCOMPLETE)
    return {
        NEW_LISTING: "".join(f"{p}\n" for p in paths).encode(),
        PENDING: pending.to_json().encode(),
        COMPLETE: manifest.to_json().encode(),
    }


def _staged() -> str:
    """Every name the switch keeps aside, quoted for the shell: what is cleared before and after it."""
    return " ".join(
        shlex.quote(n) for n in (ARCHIVE, UNPACKED, NEW_LISTING, PENDING, COMPLETE, _FOUND, _LISTED)
    )


def prepare_script(path: str) -> str:
    """Make the dataset's directory and clear what an earlier, interrupted synth left aside there."""
    return f"set -e; mkdir -p -- {shlex.quote(path)}; cd -- {shlex.quote(path)}; rm -rf -- {_staged()}"


def write_script(path: str) -> str:
    """The script that switches ``path`` from its old dataset (if any) to the uploaded one (module doc)."""
    q = shlex.quote
    tops = " ".join(_TOPS)
    staged = _staged()
    listing, unpacked = q(LISTING_NAME), q(UNPACKED)
    return f"""set -e
export LC_ALL=C
cd -- {q(path)}
trap 'rm -rf -- {staged}' EXIT
refuse() {{ printf '%s%s\\n' {q(REFUSAL)} "$1" >&2; exit {REFUSED}; }}
old=/dev/null
if [ -f {listing} ]; then old={listing}; fi
if grep -qvxE {q(LISTED_PATH)} "$old"; then
  bad=$(grep -vxE {q(LISTED_PATH)} "$old" | head -n 1)
  refuse "$PWD/{LISTING_NAME} names '$bad', which is no path data synth writes (outside the dataset, or not its layout): nothing was removed. Fix: check who wrote it; remove the directory yourself or name another --path."
fi
sort -u "$old" > {q(_LISTED)}
{{ find {tops} ! -type d 2>/dev/null || true; }} | sort -u > {q(_FOUND)}
stray=$(comm -23 {q(_FOUND)} {q(_LISTED)} | head -n 1)
[ -z "$stray" ] || refuse "$PWD/$stray is not a file data synth wrote (someone else's file, or a symbolic link): nothing was changed. Fix: move it out of the dataset's directory, or name another --path."
mkdir -- {unpacked}
tar -x --no-same-owner -C {unpacked} -f {q(ARCHIVE)}
rm -f -- {q(ARCHIVE)}
mv -f -- {q(PENDING)} {q(MANIFEST_NAME)}
grep -xE {q(LISTED_PATH)} "$old" | tr '\\n' '\\0' | xargs -0 -r rm -f --
{{ sed 's|/[^/]*$||' "$old"; sed 's|/.*$||' "$old"; }} | sort -ru | while IFS= read -r d; do
  if [ -d "$d" ] && [ ! -L "$d" ]; then rmdir -- "$d" 2>/dev/null || true; fi
done
for d in {tops}; do
  if [ ! -e {unpacked}/"$d" ]; then continue; fi
  if [ -L "$d" ]; then refuse "$PWD/$d became a symbolic link while data synth wrote: the dataset is left incomplete. Fix: remove the link and run data synth again."
  elif [ -e "$d" ]; then cp -R -l -- {unpacked}/"$d"/. "$d"/
  else mv -- {unpacked}/"$d" "$d"; fi
done
mv -f -- {q(NEW_LISTING)} {listing}
mv -f -- {q(COMPLETE)} {q(MANIFEST_NAME)}
"""
