# ---- patchkit target-side library (POSIX sh; GNU coreutils or BusyBox) ----------------------
# Sent, after the per-operation data, as one program on standard input (`sh -s`). It needs sh,
# sed, wc, sha256sum (or shasum), mktemp, mv, mkdir, rm, cp, ln, uname, date; rmdir and ls where
# present (tidying up, identifying a lock's owner). Answers go to
# stdout as lines starting with "@pk "; the client decides what they mean.
# Per-file data: pk_<field>_<k> variables set by pk_file; k = 1..PK_N.

pk_out() { printf '@pk %s\n' "$*"; }
pk_die() { _c=$1; shift; pk_out "error $_c $*"; exit "$_c"; }
pk_get() { eval "_v=\${$1_$2}"; }

pk_cleanup() {  # the EXIT trap: whatever ended the program (an error, an interrupt), no trace of it
  trap '' HUP INT TERM            # a second Ctrl-C does not cut the cleanup short
  [ -n "${PK_T:-}" ] && rm -rf "$PK_T"
  # an apply that stops before its commit began leaves no staged files, copies or manifest
  if [ "${PK_UNDO_STAGE:-0}" = 1 ]; then
    rm -rf "$PK_ROOT/.patchkit/stage" "$PK_ROOT/.patchkit/orig" "$PK_ROOT/.patchkit/manifest" \
      "$PK_ROOT/.patchkit/manifest.tmp" "$PK_ROOT/.patchkit/mkdirs"
    [ "${PK_JOURNAL_OURS:-0}" = 1 ] && rm -f "$PK_ROOT/.patchkit/journal"
  fi
  [ "${PK_BREAKING:-0}" = 1 ] && pk_rm_own .patchkit/lock.break
  pk_lock_release
  # said last, once nothing of this operation is left but what the answer reports
  [ -n "${PK_SIG:-}" ] && pk_out "interrupted $PK_SIG"
  :
}

# Ctrl-C (INT), SIGTERM and a lost terminal (HUP) end the program through pk_cleanup; during a
# commit, a revert's restore or an unstage (pk_hold) the signal is only noted, and the step runs
# to its end, so every target is either untouched or completely in the new state.
pk_signal() {  # exit-code
  PK_SIG=$1
  [ "${PK_HOLD:-0}" = 1 ] && return 0
  exit "$1"
}
pk_hold() { PK_HOLD=1; pk_out "step hold"; }
pk_unhold() { PK_HOLD=0; [ -z "${PK_SIG:-}" ] || exit "$PK_SIG"; }   # a noted signal acts now

pk_init() {
  LC_ALL=C; export LC_ALL
  set -f
  PK_T=; PK_LOCKED=0; PK_LOCKTMP=; PK_REFUSE=0
  PK_SIG=; PK_HOLD=0; PK_LOCKING=0
  trap pk_cleanup EXIT
  trap 'pk_signal 129' HUP; trap 'pk_signal 130' INT; trap 'pk_signal 143' TERM; trap '' PIPE
  [ -d "$PK_ROOT" ] || pk_die 1 "target root $PK_ROOT does not exist or is not a directory"
  cd "$PK_ROOT" || pk_die 1 "cannot enter $PK_ROOT (permission denied?)"
  if command -v sha256sum >/dev/null 2>&1; then PK_SHA=sha256sum
  elif command -v shasum >/dev/null 2>&1; then PK_SHA='shasum -a 256'
  else pk_die 1 "the target has no sha256 tool (sha256sum or shasum)"; fi
  for _t in sed wc mktemp mv mkdir rm; do
    command -v "$_t" >/dev/null 2>&1 || pk_die 1 "the target lacks '$_t'"
  done
  PK_T=$(mktemp -d "${TMPDIR:-/tmp}/patchkit.XXXXXX") || pk_die 1 "mktemp -d failed on the target"
  mkdir "$PK_T/x" "$PK_T/y" "$PK_T/s" || pk_die 1 "cannot create temporary files in ${TMPDIR:-/tmp}"
}

pk_file() {  # k kind checkout-path installed-path pinned-sha lines state-slot dir-index
  eval "pk_kind_$1=\$2 pk_pco_$1=\$3 pk_pin_$1=\$4 pk_sha_$1=\$5 pk_lines_$1=\$6 pk_dir_$1=\$7 pk_fdir_$1=\$8"
}
pk_expect() {  # k pre-extract-sha post-extract-sha post-wc
  eval "pk_prex_$1=\$2 pk_postx_$1=\$3 pk_postwc_$1=\$4"
}

# -- layout -------------------------------------------------------------------------------------
pk_table_load() {  # the per-file data (pk_file, pk_expect lines), once
  [ "${PK_TABLE:-0}" = 1 ] || { PK_TABLE=1; pk_table; }
}

pk_layout() {  # wanted (auto|checkout|installed)
  pk_table_load
  _want=$1; _k=1; _seen=
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_kind "$_k"; _kind=$_v
    if [ "$_kind" != create ]; then
      pk_get pk_pco "$_k"; _co=$_v; pk_get pk_pin "$_k"; _in=$_v
      if [ "$_want" = auto ]; then
        if [ -e "$_co" ] || [ -L "$_co" ]; then _want=checkout
        elif [ -e "$_in" ] || [ -L "$_in" ]; then _want=installed; fi
      fi
      _seen="$_seen $_co"
    fi
    [ "$_want" = auto ] || break       # decided: the rest only matters to say what was missing
    _k=$((_k + 1))
  done
  if [ "$_want" = auto ]; then
    if [ -z "$_seen" ]; then _want=checkout
    else pk_out "layout none"; pk_die 1 "none of the pinned files exists under $PK_ROOT (checked:$_seen, with and without the package prefix)"; fi
  fi
  PK_LAYOUT=$_want
  pk_out "layout $PK_LAYOUT"
  _k=1
  while [ "$_k" -le "$PK_N" ]; do
    if [ "$PK_LAYOUT" = installed ]; then pk_get pk_pin "$_k"; else pk_get pk_pco "$_k"; fi
    eval "pk_p_$_k=\$_v"
    pk_nosymlink "$_v"
    _k=$((_k + 1))
  done
}

pk_nosymlink() {  # refuse any path whose components (under the root) include a symlink
  _acc=; _old_ifs=$IFS; IFS=/
  for _c in $1; do
    _acc=${_acc:+$_acc/}$_c
    if [ -L "$_acc" ]; then IFS=$_old_ifs; pk_die 1 "refusing to follow the symlink $PK_ROOT/$_acc (on the way to $1)"; fi
  done
  IFS=$_old_ifs
}

pk_git_check() {  # expected commit
  if [ ! -e .git ]; then pk_out "git none"; return 0; fi
  _head=
  if command -v git >/dev/null 2>&1; then _head=$(git rev-parse -q --verify HEAD 2>/dev/null) || _head=; fi
  if [ -z "$_head" ] && [ -f .git/HEAD ]; then
    read -r _ref < .git/HEAD
    case $_ref in
      "ref: "*) _r=${_ref#ref: }
        if [ -f ".git/$_r" ]; then read -r _head < ".git/$_r"
        elif [ -f .git/packed-refs ]; then _head=$(sed -n "s|^\([0-9a-f]\{40\}\) $_r\$|\1|p" .git/packed-refs); fi ;;
      *) _head=$_ref ;;
    esac
  fi
  pk_out "git head ${_head:-unknown}"
  [ "$_head" = "$1" ] || PK_REFUSE=1
}

pk_version_check() {  # dist-name "version [also-version...]" (no spaces inside a version)
  _found=
  set +f
  for _d in "$1"-*.dist-info; do
    [ -f "$_d/METADATA" ] || continue
    _ver=$(sed -n 's/^Version:[ 	]*//p' "$_d/METADATA" | sed -n '1p')
    pk_out "dist $_ver $_d"
    _found=1
    case "$_ver" in
      ''|*' '*|*'	'*) ;;  # empty or several words: never one of the pinned versions
      *) case " $2 " in *" $_ver "*) _ok=1 ;; esac ;;
    esac
  done
  set -f
  if [ -z "$_found" ]; then pk_out "dist none"; PK_REFUSE=1
  elif [ -z "${_ok:-}" ]; then PK_REFUSE=1; fi
  _ok=
}

# -- batched measurements -------------------------------------------------------------------------
PK_NL='
'

pk_list_reset() { PK_LK=; PK_LP=; }
pk_list_add() { PK_LK="$PK_LK $1"; PK_LP="$PK_LP$PK_NL$2"; }

pk_batch() {  # tool var-prefix: runs tool once on the listed paths, sets <prefix>_<key> to field 1
  # In-memory lists: dash's `read` costs a system call per byte, too slow for big series.
  _tool=$1; _pre=$2
  [ -n "$PK_LK" ] || return 0
  _oifs=$IFS; IFS=$PK_NL
  # shellcheck disable=SC2086
  set -- $PK_LP
  IFS=$_oifs
  _out=$($_tool "$@" 2> "$PK_T/err") || pk_die 1 "$_tool failed on the target: $(sed -n '1p' "$PK_T/err")"
  # shellcheck disable=SC2086
  set -- $PK_LK
  IFS=$PK_NL
  for _line in $_out; do
    [ $# -gt 0 ] || break
    _line=${_line#"${_line%%[! ]*}"}
    _val=${_line%%[ 	]*}
    eval "${_pre}_$1=\${_val#\\\\}"
    shift
  done
  IFS=$_oifs
  [ $# -eq 0 ] || pk_die 1 "$_tool printed too little"
}

# -- checks: files against the pin, hunks' lines at their numbers --------------------------------
# The common case is checked in bulk: a tool's first column (counts, hashes) for all files at
# once against the list the client expects (PK_W_*). Any difference, or output of an unexpected
# shape, falls back to the per-file comparison below, which says what differs.

pk_column() {  # tool output -> _col: each line's first field, one per line
  _col=; _oifs=$IFS; IFS=$PK_NL
  for _l in $1; do _l=${_l#"${_l%%[! ]*}"}; _col="$_col${_l%%[ 	]*}$PK_NL"; done
  IFS=$_oifs
}

pk_files_match() {  # with-hunks: 0 when every listed file has its pinned wc -l, sha256 (and hunk lines)
  _fh=$1
  if [ -z "$PK_LK" ]; then [ "$_fh" = 1 ] && pk_extract_pre 1; return 0; fi
  _oifs=$IFS; IFS=$PK_NL
  # shellcheck disable=SC2086
  set -- $PK_LP
  IFS=$_oifs
  _out=$(wc -l "$@" 2>/dev/null) || return 1
  pk_column "$_out"; [ "$_col" = "$PK_W_WC" ] || return 1
  _want=$PK_W_SHA
  if [ "$_fh" = 1 ]; then
    pk_extract_pre 1
    _al=$PK_LP
    for _k in $PK_LK; do _al="$_al$PK_NL$PK_T/x/$_k"; done
    _oifs=$IFS; IFS=$PK_NL; set -- $_al; IFS=$_oifs
    _want=$PK_W_SHA$PK_W_PREX
  fi
  _out=$($PK_SHA "$@" 2>/dev/null) || return 1
  pk_column "$_out"; [ "$_col" = "$_want" ]
}

pk_check_files() {  # with-hunks (1/0)
  _hunks=$1; pk_list_reset; _k=1; PK_DRIFT=0; _present=
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_kind "$_k"; _kind=$_v; pk_get pk_p "$_k"; _p=$_v
    if [ "$_kind" = create ]; then
      if [ -e "$_p" ] || [ -L "$_p" ]; then pk_out "file $_k exists"; PK_DRIFT=1; fi
    elif [ -f "$_p" ]; then pk_list_add "$_k" "$_p"; _present="$_present $_k"
    else pk_out "file $_k missing"; PK_DRIFT=1; fi
    _k=$((_k + 1))
  done
  if [ "$PK_DRIFT" = 0 ] && pk_files_match "$_hunks"; then pk_out "files ok"; return 0; fi
  pk_batch "wc -l" pk_wc
  _wcok=1
  for _k in $_present; do
    pk_get pk_wc "$_k"; _w=$_v; pk_get pk_lines "$_k"
    [ "$_w" = "$_v" ] || _wcok=0
  done
  PK_XSKIP=1
  if [ "$_hunks" = 1 ]; then
    pk_extract_pre "$_wcok"
    [ "$PK_XSKIP" = 1 ] || for _k in $_present; do pk_list_add "x_$_k" "$PK_T/x/$_k"; done
  fi
  # one hashing process for the files and their extracted hunk lines
  pk_batch "$PK_SHA" pk_h
  for _k in $_present; do
    pk_get pk_wc "$_k"; _w=$_v; pk_get pk_h "$_k"; _h=$_v
    _px=-; _ok=1
    pk_get pk_lines "$_k"; [ "$_w" = "$_v" ] || _ok=0
    pk_get pk_sha "$_k"; [ "$_h" = "$_v" ] || _ok=0
    if [ "$_hunks" = 1 ] && [ "$PK_XSKIP" = 0 ]; then
      pk_get pk_h_x "$_k"; _px=$_v; pk_get pk_prex "$_k"; [ "$_px" = "$_v" ] || _ok=0
    fi
    pk_out "file $_k present $_w $_h $_px"
    if [ "$_ok" = 0 ]; then PK_DRIFT=1; pk_get pk_p "$_k"; pk_dump "$_k" "$_v"; fi
  done
}

pk_dump() {  # k path: the whole file, numbered, for a precise drift report
  if [ "${PK_DUMP:-1}" = 1 ]; then
    pk_out "dump $1"; sed -n '=;p' "$2"; printf '\n'; pk_out "enddump"
  fi
}

pk_extract_pre() {  # wc-all-ok
  # Multi-file extraction: one sed for a chunk of files, lines numbered as one stream.
  # `$=` tells whether a file ends with an unterminated line the offsets did not count; then
  # nothing is written and the client resends the program with one sed per file (PK_SINGLE).
  PK_XSKIP=0
  if [ "$1" != 1 ] && [ "$PK_SINGLE" != 1 ]; then PK_XSKIP=1; return 0; fi
  _c=1
  while [ "$_c" -le "$PK_CHUNKS" ]; do
    pk_get pk_chunk "$_c"; _files=$_v; pk_get pk_pretotal "$_c"; _want=$_v
    if [ "$PK_SINGLE" != 1 ]; then
      set --
      _al=
      for _k in $_files; do pk_get pk_kind "$_k"; [ "$_v" = create ] && continue; pk_get pk_p "$_k"; _al="$_al$PK_NL$PK_ROOT/$_v"; : > "$PK_T/x/$_k"; done
      _oifs=$IFS; IFS=$PK_NL; set -- $_al; IFS=$_oifs
      if [ $# -gt 0 ]; then
        _got=$(cd "$PK_T" && sed -n -f "$PK_T/s/pre.c$_c.sed" "$@") || pk_die 1 "sed failed on the target"
        if [ "$_got" != "$_want" ]; then pk_out "retry single"; exit 3; fi
      fi
      eval "pk_mode_$_c=multi"
    else
      for _k in $_files; do
        pk_get pk_kind "$_k"; [ "$_v" = create ] && continue
        pk_get pk_p "$_k"; : > "$PK_T/x/$_k"
        [ -f "$_v" ] && (cd "$PK_T" && sed -n -f "$PK_T/s/pre.f$_k.sed" "$PK_ROOT/$_v")
      done
      eval "pk_mode_$_c=single"
    fi
    _c=$((_c + 1))
  done
}

# -- staging: sed edits into a stage directory, then the post-image checks ------------------------
pk_writable_dirs() {  # every directory a commit will rename into must be writable (read-only mounts too)
  _wmode=${1:-die}; _k=1
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_p "$_k"; _dest=${_v%/*}; [ "$_dest" = "$_v" ] && _dest=.
    while [ ! -d "$_dest" ] && [ "$_dest" != . ]; do
      case $_dest in */*) _dest=${_dest%/*} ;; *) _dest=. ;; esac
    done
    if [ ! -w "$_dest" ]; then
      [ "$_wmode" = verify ] && { pk_out "error 1 apply would fail: $PK_ROOT/$_dest is not writable (read-only file system or permission denied)"; PK_REFUSE=1; return 0; }
      # the system's own reason (strerror: what follows the shell's last ": "), from a probe
      _why=$( (: > "$_dest/.patchkit-probe.$$") 2>&1 ) && rm -f "$_dest/.patchkit-probe.$$"
      pk_die 1 "cannot write to $PK_ROOT/$_dest (read-only file system or permission denied); nothing changed${_why:+ (${_why##*: })}"
    fi
    _k=$((_k + 1))
  done
}

pk_stage() {  # stage-dir copy-modes(1/0)
  case $1 in /*) _sd=$1 ;; *) _sd=$PK_ROOT/$1 ;; esac
  _copy=$2
  set --
  for _d in $PK_DIRS; do set -- "$@" "$_sd/$_d"; done
  mkdir -p "$@" || pk_die 1 "cannot create the stage directories under $_sd (disk full or read-only?)"
  PK_RO=
  if [ "$_copy" = 1 ]; then pk_by_dir m pk_copy_modes "$_sd"; pk_ro_staged u+w; fi
  # every staged file starts empty or as the created text (the client lists them: no lookups)
  pk_stage_start "$_sd" || pk_die 1 "cannot write the staged files under $_sd (disk full or read-only?)"
  if [ -n "${PK_EXEC:-}" ]; then          # created with git's "new file mode 100755"
    set --
    for _k in $PK_EXEC; do pk_staged_path "$_sd" "$_k"; set -- "$@" "$_sp"; done
    chmod +x "$@" || pk_die 1 "chmod +x failed on the target"
  fi
  _c=1
  while [ "$_c" -le "$PK_CHUNKS" ]; do
    pk_get pk_chunk "$_c"; _files=$_v; pk_get pk_mode "$_c"; _mode=$_v
    if [ "$_mode" = multi ]; then
      set --
      _al=
      for _k in $_files; do pk_get pk_kind "$_k"; [ "$_v" = modify ] || continue; pk_get pk_p "$_k"; _al="$_al$PK_NL$PK_ROOT/$_v"; done
      _oifs=$IFS; IFS=$PK_NL; set -- $_al; IFS=$_oifs
      if [ $# -gt 0 ]; then (cd "$_sd" && sed -n -f "$PK_T/s/stage.c$_c.sed" "$@") || pk_die 1 "sed failed while staging (disk full?)"; fi
    else
      for _k in $_files; do
        pk_get pk_kind "$_k"; [ "$_v" = modify ] || continue; pk_get pk_p "$_k"
        (cd "$_sd" && sed -n -f "$PK_T/s/stage.f$_k.sed" "$PK_ROOT/$_v") || pk_die 1 "sed failed while staging $_v"
      done
    fi
    # new lines after the last original line of a file, by printf (listed per chunk by the client)
    pk_stage_tails_"$_c" "$_sd" || pk_die 1 "cannot write the staged files under $_sd (disk full?)"
    _c=$((_c + 1))
  done
  pk_ro_staged u-w
  pk_check_staged "$_sd"
}

pk_staged_path() {  # stage-dir k -> _sp
  pk_get pk_p "$2"; _b=${_v##*/}; pk_get pk_dir "$2"; _sp="$1/$_v/$_b"
}

pk_copy_modes() {  # stage-dir slot files...: staged files start as copies (modes kept)
  _csd=$1; _cd=$2; shift 2
  cp -p "$@" "$_csd/$_cd/" 2>/dev/null || :
  for _cf in "$@"; do   # a read-only original: its copy is made writable for sed, and read-only again
    [ -w "$_csd/$_cd/${_cf##*/}" ] || PK_RO="${PK_RO:-}$PK_NL$_csd/$_cd/${_cf##*/}"
  done
}

pk_ro_staged() {  # u+w | u-w on the staged copies of read-only originals (one chmod)
  [ -n "${PK_RO:-}" ] || return 0
  _rmode=$1; _oifs=$IFS; IFS=$PK_NL
  # shellcheck disable=SC2086
  set -- $PK_RO
  IFS=$_oifs
  chmod "$_rmode" "$@" || pk_die 1 "chmod $_rmode failed on the target"
}

pk_by_dir() {  # kind function extra: calls `function extra slot files...` once per state slot
  # Groups come precomputed with the data: pk_g<kind>_<slot> lists the file numbers. A slot
  # (folder under .patchkit/stage and orig) holds files of many directories, one per base name.
  _bkind=$1; _bfn=$2; _bextra=$3
  for _bd in $PK_DIRS; do
    pk_get "pk_g$_bkind" "$_bd"; _bks=$_v
    [ -n "$_bks" ] || continue
    _al="${_bextra:--}$PK_NL$_bd"     # never empty: an empty first field would vanish
    for _bj in $_bks; do pk_get pk_p "$_bj"; _al="$_al$PK_NL$_v"; done
    _oifs=$IFS; IFS=$PK_NL; set -- $_al; IFS=$_oifs
    "$_bfn" "$@" || return 1
  done
}

pk_check_staged() {  # stage-dir: wc, post-image lines, sha256 of every staged file
  _sd=$1; pk_list_reset; _k=1; _staged=
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_kind "$_k"
    if [ "$_v" != delete ]; then
      pk_staged_path "$_sd" "$_k"; pk_list_add "$_k" "$_sp"; : > "$PK_T/y/$_k"; _staged="$_staged $_k"
    fi
    _k=$((_k + 1))
  done
  pk_staged_match && return 0
  pk_batch "wc -l" pk_swc
  pk_post_extract
  for _k in $_staged; do pk_list_add "y_$_k" "$PK_T/y/$_k"; done
  pk_batch "$PK_SHA" pk_s
  PK_BADSTAGE=0
  for _k in $_staged; do
    pk_get pk_swc "$_k"; _w=$_v; pk_get pk_s "$_k"; _h=$_v; pk_get pk_s_y "$_k"; _y=$_v
    _ok=1
    pk_get pk_postwc "$_k"; [ "$_w" = "$_v" ] || _ok=0
    pk_get pk_postx "$_k"; [ "$_y" = "$_v" ] || _ok=0
    eval "pk_post_$_k=\$_h"
    pk_out "staged $_k $_w $_h $_y $_ok"
    [ "$_ok" = 1 ] || PK_BADSTAGE=1
  done
}

pk_staged_match() {  # 0 when every staged file has its expected wc -l and new lines; sets pk_post_<k>
  PK_BADSTAGE=0
  [ -n "$_staged" ] || return 0
  _oifs=$IFS; IFS=$PK_NL
  # shellcheck disable=SC2086
  set -- $PK_LP
  IFS=$_oifs
  _out=$(wc -l "$@" 2>/dev/null) || return 1
  pk_column "$_out"; [ "$_col" = "$PK_W_SWC" ] || return 1
  _out=$($PK_SHA "$@" 2>/dev/null) || return 1
  pk_column "$_out"; _hashes=$_col
  pk_post_extract
  _al=
  for _k in $_staged; do _al="$_al$PK_NL$PK_T/y/$_k"; done
  _oifs=$IFS; IFS=$PK_NL; set -- $_al; IFS=$_oifs
  _out=$($PK_SHA "$@" 2>/dev/null) || return 1
  pk_column "$_out"; [ "$_col" = "$PK_W_POSTX" ] || return 1
  _col=$_hashes
  # shellcheck disable=SC2086
  set -- $_staged
  _oifs=$IFS; IFS=$PK_NL
  for _h in $_col; do eval "pk_post_$1=\$_h"; shift; done
  IFS=$_oifs
  pk_out "stage verified"
}

pk_post_extract() {  # the staged files' new lines at their new numbers, one sed per chunk
  _c=1
  while [ "$_c" -le "$PK_CHUNKS" ]; do
    pk_get pk_chunk "$_c"; _files=$_v; pk_get pk_mode "$_c"
    if [ "$_v" = multi ]; then
      set --
      _al=
      for _k in $_files; do pk_get pk_kind "$_k"; [ "$_v" = delete ] && continue; pk_staged_path "$_sd" "$_k"; _al="$_al$PK_NL$_sp"; done
      _oifs=$IFS; IFS=$PK_NL; set -- $_al; IFS=$_oifs
      [ $# -gt 0 ] && { (cd "$PK_T" && sed -n -f "$PK_T/s/post.c$_c.sed" "$@") || pk_die 1 "sed failed on the target"; }
    else
      for _k in $_files; do
        pk_get pk_kind "$_k"; [ "$_v" = delete ] && continue; pk_staged_path "$_sd" "$_k"
        (cd "$PK_T" && sed -n -f "$PK_T/s/post.f$_k.sed" "$_sp") || pk_die 1 "sed failed on the target"
      done
    fi
    _c=$((_c + 1))
  done
}

# -- state under <root>/.patchkit: lock, manifest, originals ------------------------------------
pk_state_safe() {  # patchkit's own state must not lead outside the root through a symlink
  for _s in .patchkit .patchkit/lock .patchkit/lock.break .patchkit/orig .patchkit/stage .patchkit/trash \
            .patchkit/manifest .patchkit/manifest.tmp .patchkit/journal .patchkit/mkdirs \
            .patchkit/exclude .patchkit/exclude.orig .patchkit/exclude.new; do
    [ -L "$_s" ] && pk_die 1 "refusing: $PK_ROOT/$_s is a symlink (patchkit state must stay inside the root)"
  done
  :
}

# The lock is one line in .patchkit/lock: created whole (a hard link to a finished file, so it is
# never seen empty) and exclusively (link fails when it exists). It records who holds it well
# enough to prove the holder dead later: host, machine id, boot id, pid namespace, pid and the
# process start time (pid reuse). A provably dead holder's lock is taken over; any other is refused.
pk_lock_facts() {  # this shell's identity: PK_HOST PK_MACHINE PK_BOOT PK_NS PK_START PK_NOW
  # the host name as uname -n prints it; /proc has it without starting a process
  { read -r PK_HOST < /proc/sys/kernel/hostname; } 2>/dev/null || PK_HOST=$(uname -n 2>/dev/null)
  [ -n "$PK_HOST" ] || PK_HOST=-
  PK_NOW=$(date +%s)
  PK_MACHINE=-; PK_BOOT=-; PK_NS=-
  { read -r PK_MACHINE < /etc/machine-id || read -r PK_MACHINE < /var/lib/dbus/machine-id; } 2>/dev/null
  { read -r PK_BOOT < /proc/sys/kernel/random/boot_id; } 2>/dev/null
  _l=$(ls -l "/proc/$$/ns/pid" 2>/dev/null) || _l=
  case $_l in *'['*']'*) _l=${_l##*\[}; PK_NS=${_l%%\]*} ;; esac
  [ -n "$PK_MACHINE" ] || PK_MACHINE=-; [ -n "$PK_BOOT" ] || PK_BOOT=-
  pk_pid_state "$$"; PK_START=$_pst
  PK_LOCKLINE="pid=$$ host=$PK_HOST user=${USER:-${LOGNAME:-unknown}} op=$PK_OP time=$PK_NOW start=$PK_START boot=$PK_BOOT ns=$PK_NS machine=$PK_MACHINE"
}

pk_pid_state() {  # pid -> _pidst: alive | gone | zombie, _pst: its start time (or -)
  _pst=-; _pidst=alive
  if { read -r _stl < "/proc/$1/stat"; } 2>/dev/null; then
    _stl=${_stl##*) }
    # shellcheck disable=SC2086
    set -- $_stl
    case $1 in Z|X|x) _pidst=zombie; return 0 ;; esac
    [ $# -ge 20 ] && { shift 19; _pst=$1; }
    return 0
  fi
  # no /proc entry (or /proc hidden or absent): only "No such process" proves it gone
  if _e=$(kill -0 "$1" 2>&1); then :; else case $_e in *"No such process"*|*"no such process"*) _pidst=gone ;; esac; fi
}

pk_lock_judge() {  # owner-line -> _lstate: dead | held | foreign | noowner; _lreason; _lage (s)
  _lreason=-; _lage=0
  _opid=; _ohost=; _otime=; _ostart=; _oboot=; _ons=; _omach=
  for _kv in $1; do
    case $_kv in
      pid=*) _opid=${_kv#pid=} ;; host=*) _ohost=${_kv#host=} ;; time=*) _otime=${_kv#time=} ;;
      start=*) _ostart=${_kv#start=} ;; boot=*) _oboot=${_kv#boot=} ;; ns=*) _ons=${_kv#ns=} ;;
      machine=*) _omach=${_kv#machine=} ;;
    esac
  done
  case $_otime in ''|*[!0-9]*) ;; *) _lage=$((PK_NOW - _otime)) ;; esac
  case $_opid in ''|*[!0-9]*) _lstate=noowner; return 0 ;; esac
  _lstate=foreign
  # another machine (host name, and the machine id where the lock records one): unknowable
  [ "$_ohost" = "$PK_HOST" ] || { _lreason=other-host; return 0; }
  [ -z "$_omach" ] || [ "$_omach" = "$PK_MACHINE" ] || { _lreason=other-machine; return 0; }
  if [ -n "$_oboot" ] && [ "$_oboot" != - ] && [ "$PK_BOOT" != - ] && [ "$_oboot" != "$PK_BOOT" ]; then
    # this machine booted since; without a machine id a same-named host could be another one
    if [ -n "$_omach" ] && [ "$_omach" != - ]; then _lstate=dead; _lreason=rebooted
    else _lreason=other-boot; fi
    return 0
  fi
  [ -z "$_ons" ] || [ "$_ons" = "$PK_NS" ] || { _lreason=other-pid-namespace; return 0; }
  _lstate=dead
  if [ "$_opid" = "$$" ]; then _lreason=pid-reused; return 0; fi   # not us: we hold no lock yet
  pk_pid_state "$_opid"
  case $_pidst in
    gone) _lreason=pid-gone ;;
    zombie) _lreason=zombie ;;
    *) case "$_ostart:$_pst" in
         *[!0-9:]*|:*|*:) _lstate=held ;;         # no start time to compare: a live pid is live
         *) if [ "$_ostart" = "$_pst" ]; then _lstate=held; else _lreason=pid-reused; fi ;;
       esac ;;
  esac
}

pk_lock_read() {  # -> _lline: the owner line of .patchkit/lock (or of an older patchkit's lock dir)
  _lline=
  if [ -d .patchkit/lock ]; then { read -r _lline < .patchkit/lock/owner; } 2>/dev/null
  else { read -r _lline < .patchkit/lock; } 2>/dev/null; fi
  :
}

pk_excl() {  # path: create it, exclusively, holding our owner line
  [ -d "$1" ] && return 1
  if ln "$PK_LOCKTMP" "$1" 2>/dev/null; then
    # an older patchkit's lock directory appeared meanwhile: ln linked into it
    if [ -d "$1" ]; then rm -f "$1/${PK_LOCKTMP##*/}"; return 1; fi
    return 0
  fi
  { [ -e "$1" ] || [ -L "$1" ]; } && return 1
  # a file system without hard links: an exclusive create (noclobber is O_EXCL)
  ( set -C; printf '%s\n' "$PK_LOCKLINE" > "$1" ) 2>/dev/null
}

pk_lock() {
  pk_state_safe
  PK_LOCKING=1                    # from here pk_lock_release removes what this takes (if ours)
  if [ ! -d .patchkit ]; then
    # another operation may make it at the same instant: then its lock decides, below
    # the first write of an operation: a root we may not write to is said as README promises
    mkdir .patchkit 2>"$PK_T/err" || [ -d .patchkit ] || {
      _why=$(sed -n '1p' "$PK_T/err")  # the system's own reason follows mkdir's last ": "
      [ -w . ] || pk_die 1 "cannot write to $PK_ROOT (read-only file system or permission denied); nothing changed${_why:+ (${_why##*: })}"
      pk_die 1 "cannot create $PK_ROOT/.patchkit: $(sed -n '1p' "$PK_T/err"); nothing changed"
    }
  fi
  pk_lock_facts
  PK_LOCKTMP=.patchkit/lock.$$
  if ! ( set -C; printf '%s\n' "$PK_LOCKLINE" > "$PK_LOCKTMP" ) 2>/dev/null; then
    # a leftover of an earlier process that had our pid
    rm -f "$PK_LOCKTMP"
    ( set -C; printf '%s\n' "$PK_LOCKLINE" > "$PK_LOCKTMP" ) 2>/dev/null \
      || pk_die 1 "cannot write $PK_ROOT/$PK_LOCKTMP (disk full or read-only?)"
  fi
  _try=0
  while ! pk_excl .patchkit/lock; do
    pk_lock_read; pk_lock_judge "$_lline"
    if [ "$_lstate" != dead ] || [ "$_try" -ge 3 ]; then
      pk_out "lock $_lstate $_lreason $_lage $_lline"
      pk_die 1 "target is locked"
    fi
    if pk_lock_takeover "$_lline" "$_lreason"; then pk_out "takeover $_lreason $_lage $_lline"; break; fi
    _try=$((_try + 1))
  done
  PK_LOCKED=1
  pk_out "step lock"
  pk_lock_sweep
}

pk_lock_takeover() {  # dead-owner-line reason: replace that lock by ours; 1 when it changed meanwhile
  # Takers are serialised by .patchkit/lock.break (made like the lock): while we hold it nobody
  # else removes the lock, so the one we judged dead is the one we remove.
  PK_BREAKING=1
  if ! pk_excl .patchkit/lock.break; then
    _bline=; { read -r _bline < .patchkit/lock.break; } 2>/dev/null
    pk_lock_judge "$_bline"
    if [ "$_lstate" != dead ]; then
      pk_out "lock $_lstate taking-over $_lage $_bline"
      pk_die 1 "target is locked (another operation is taking over a dead lock)"
    fi
    rm -f .patchkit/lock.break          # a taker that died in the act
    pk_excl .patchkit/lock.break || return 1
  fi
  pk_lock_read
  if [ "$_lline" != "$1" ]; then rm -f .patchkit/lock.break; PK_BREAKING=0; return 1; fi
  rm -rf .patchkit/lock
  printf '%s %s took-over-lock %s reason=%s %s\n' "$PK_NOW" "$PK_OP" "$PK_SERIES" "$2" "$1" \
    >> .patchkit/journal 2>/dev/null || :
  # an operation that found no lock in this instant may win it; then we are refused as usual
  if pk_excl .patchkit/lock; then rm -f .patchkit/lock.break; PK_BREAKING=0; return 0; fi
  rm -f .patchkit/lock.break; PK_BREAKING=0; return 1
}

pk_lock_sweep() {  # drop our identity file, and those (and a takeover token) of dead operations
  _own=$PK_LOCKTMP; PK_LOCKTMP=; _dead=
  set +f; set -- .patchkit/lock.[0-9]* .patchkit/lock.break; set -f
  for _f in "$@"; do
    [ -f "$_f" ] && [ "$_f" != "$_own" ] || continue
    _fl=; { read -r _fl < "$_f"; } 2>/dev/null
    [ -n "$_fl" ] || continue
    pk_lock_judge "$_fl"; [ "$_lstate" = dead ] && _dead="$_dead $_f"
  done
  # shellcheck disable=SC2086
  rm -f "$_own" $_dead
  pk_tmp_sweep
}

# A locking operation's temporary directory names its owner (the lock's identity line), so a
# later one can remove it when that owner is provably dead: SIGKILL skips the EXIT trap that
# removes it. Directories without an owner file (an operation that takes no lock, or one killed
# before it locked) are left alone, as are those of live, unknown or other-host owners.
pk_tmp_sweep() {
  printf '%s\n' "$PK_LOCKLINE" > "$PK_T/owner" 2>/dev/null || return 0
  set +f; set -- "${TMPDIR:-/tmp}"/patchkit.??????/owner; set -f
  for _f in "$@"; do
    [ "$_f" != "$PK_T/owner" ] && [ -f "$_f" ] || continue
    _fl=; { read -r _fl < "$_f"; } 2>/dev/null
    [ -n "$_fl" ] || continue
    pk_lock_judge "$_fl"; [ "$_lstate" = dead ] && rm -rf "${_f%/owner}" 2>/dev/null
  done
  :
}

pk_lock_release() {  # only our own lock; then .patchkit itself when nothing is left in it
  [ -n "${PK_LOCKTMP:-}" ] && rm -f "$PK_LOCKTMP"
  [ "${PK_LOCKED:-0}" = 1 ] || [ "${PK_LOCKING:-0}" = 1 ] || return 0
  pk_rm_own .patchkit/lock
  pk_state_empty && rmdir .patchkit 2>/dev/null
  :
}

pk_rm_own() {  # path: remove a lock file only when it holds our owner line
  _cl=; { read -r _cl < "$1"; } 2>/dev/null
  [ -n "${PK_LOCKLINE:-}" ] && [ "$_cl" = "$PK_LOCKLINE" ] && rm -f "$1"
  :
}

pk_state_empty() {  # 0 when .patchkit holds nothing but the names given
  set +f
  for _e in .patchkit/* .patchkit/.[!.]* .patchkit/..?*; do
    { [ -e "$_e" ] || [ -L "$_e" ]; } || continue
    _keep=1
    for _ok in "$@"; do [ "$_e" = ".patchkit/$_ok" ] && _keep=; done
    [ -n "$_keep" ] && { set -f; return 1; }
  done
  set -f
  return 0
}

pk_lock_report() {  # status and unlock: who holds the lock, and could it be taken over
  pk_lock_facts
  pk_lock_read; pk_lock_judge "$_lline"
  pk_out "lock $_lstate $_lreason $_lage $_lline"
}

pk_manifest_read() {  # sets PK_M (1 when present), PK_M_STATE, PK_M_DIGEST, PK_M_SERIES, PK_MN, pk_m*_<i>
  PK_M=0; PK_MN=0
  [ -f .patchkit/manifest ] || return 0
  PK_M=1
  _mtext=$(sed '' .patchkit/manifest) || pk_die 1 "cannot read $PK_ROOT/.patchkit/manifest"
  _oifs=$IFS; IFS=$PK_NL
  for _mline in $_mtext; do
    IFS=' '
    # shellcheck disable=SC2086
    set -- $_mline
    case $1 in
      state) PK_M_STATE=$2 ;;
      series) PK_M_SERIES=$2; PK_M_DIGEST=$3 ;;
      f) [ $# -ge 7 ] || pk_die 1 "corrupt manifest line: $_mline"
         PK_MN=$((PK_MN + 1))
         _rest=${_mline#f "$2" "$3" "$4" "$5" "$6" }
         eval "pk_mkind_$PK_MN=\$2 pk_mpre_$PK_MN=\$3 pk_mpost_$PK_MN=\$4 pk_mdir_$PK_MN=\$5 pk_mgd_$PK_MN=\$6 pk_mp_$PK_MN=\$_rest" ;;
    esac
    IFS=$PK_NL
  done
  IFS=$_oifs
  pk_out "manifest ${PK_M_STATE:-?} ${PK_M_SERIES:-?} ${PK_M_DIGEST:-?} $PK_MN"
}

pk_manifest_body() {  # PK_MBODY, built once: per file kind, original and patched sha256, slot, dir, path
  [ -n "${PK_MBODY:-}" ] && return 0
  _k=1
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_kind "$_k"; _kind=$_v; pk_get pk_p "$_k"; _p=$_v; pk_get pk_dir "$_k"; _d=$_v
    _pre=-; _post=-
    [ "$_kind" != create ] && { pk_get pk_sha "$_k"; _pre=$_v; }
    [ "$_kind" != delete ] && { pk_get pk_post "$_k"; _post=$_v; }
    pk_get pk_fdir "$_k"
    PK_MBODY="${PK_MBODY:-}f $_kind $_pre $_post $_d $_v $_p$PK_NL"
    _k=$((_k + 1))
  done
}

pk_manifest_write() {  # state: the file is replaced atomically
  pk_manifest_body
  printf 'pk-manifest 1\nseries %s %s\nstate %s\n%s' "$PK_SERIES" "$PK_DIGEST" "$1" "$PK_MBODY" \
    > .patchkit/manifest.tmp && mv -f .patchkit/manifest.tmp .patchkit/manifest \
    || pk_die 1 "cannot write $PK_ROOT/.patchkit/manifest (disk full or read-only?)"
  printf '%s %s %s %s\n' "$(date +%s)" "$PK_OP" "$1" "$PK_SERIES" >> .patchkit/journal 2>/dev/null || :
}

pk_manifest_state() {  # classify every manifest file: sets pk_mst_<i> = original|applied|modified|absent
  pk_list_reset; _i=1
  while [ "$_i" -le "$PK_MN" ]; do
    pk_get pk_mp "$_i"; _p=$_v
    [ -f "$_p" ] && pk_list_add "$_i" "$_p"
    pk_get pk_mdir "$_i"; _d=$_v; _b=${_p##*/}
    [ -f ".patchkit/orig/$_d/$_b" ] && pk_list_add "o_$_i" ".patchkit/orig/$_d/$_b"
    _i=$((_i + 1))
  done
  pk_batch "$PK_SHA" pk_mh
  _i=1; PK_MODIFIED=0; PK_MSTATED=1
  while [ "$_i" -le "$PK_MN" ]; do
    pk_get pk_mp "$_i"; _p=$_v; pk_get pk_mkind "$_i"; _kind=$_v
    pk_get pk_mpre "$_i"; _pre=$_v; pk_get pk_mpost "$_i"; _post=$_v
    _h=; [ -f "$_p" ] && { pk_get pk_mh "$_i"; _h=$_v; }
    pk_get pk_mh_o "$_i"; _o=${_v:-}
    if [ -z "$_h" ]; then
      if [ "$_kind" = create ] || [ "$_kind" = delete ]; then _st=absent; else _st=missing; fi
    elif [ "$_h" = "$_post" ]; then _st=applied
    elif [ "$_h" = "$_pre" ]; then _st=original
    else _st=modified; fi
    case "$_kind:$_st" in
      create:absent) _st=original ;; delete:absent) _st=applied ;;
      *:missing|*:modified) PK_MODIFIED=1 ;;
    esac
    eval "pk_mst_$_i=\$_st"
    pk_out "mfile $_i $_kind $_st ${_h:--} ${_o:--} $_p"
    _i=$((_i + 1))
  done
}

pk_restore() {  # put originals back from the manifest (force: 1 keeps modified files in .patchkit/trash)
  _force=$1; _i=1; _rdirs=; _rm=
  while [ "$_i" -le "$PK_MN" ]; do
    pk_get pk_mst "$_i"; _st=$_v; pk_get pk_mkind "$_i"; _kind=$_v; pk_get pk_mp "$_i"; _p=$_v
    pk_get pk_mdir "$_i"; _d=$_v; _b=${_p##*/}; _orig=".patchkit/orig/$_d/$_b"
    pk_get pk_mpre "$_i"; _pre=$_v; pk_get pk_mh_o "$_i"; _o=${_v:-}
    pk_get pk_mgd "$_i"; _g=$_v; [ "$_g" = x ] && _g=$_d     # manifests older than slots: slot = dir
    if [ "$_st" = modified ] || [ "$_st" = missing ]; then
      [ "$_force" = 1 ] || pk_die 1 "refusing: $_p was modified after apply (use --force to discard)"
      if [ -e "$_p" ]; then mkdir -p ".patchkit/trash/$_d" && mv -f "$_p" ".patchkit/trash/$_d/$_b" \
        || pk_die 1 "cannot move the modified $_p aside"; pk_out "trashed $_i .patchkit/trash/$_d/$_b"; fi
      if [ "$_kind" = create ]; then _st=original; else _st=applied; fi
    fi
    if [ "$_st" = applied ]; then
      if [ "$_kind" = create ]; then _rm="$_rm $_i"
      else
        [ "$_o" = "$_pre" ] || pk_die 1 "the saved original of $_p is missing or damaged ($_orig); nothing restored"
        pk_get pk_rg "$_g"
        if [ -z "$_v" ]; then
          _rdirs="$_rdirs $_g"; _dest=${_p%/*}; [ "$_dest" = "$_p" ] && _dest=.
          eval "pk_rdest_$_g=\$_dest"
        fi
        eval "pk_rg_$_g=\"\$_v \$_i\""
      fi
    fi
    _i=$((_i + 1))
  done
  for _g in $_rdirs; do      # one mv per directory; each rename is atomic
    pk_get pk_rg "$_g"; _ids=$_v; pk_get pk_rdest "$_g"; _dest=$_v
    set --
    for _i in $_ids; do pk_get pk_mp "$_i"; _b=${_v##*/}; pk_get pk_mdir "$_i"; set -- "$@" ".patchkit/orig/$_v/$_b"; done
    [ -d "$_dest" ] || mkdir -p "$_dest" || pk_die 1 "cannot create $_dest"
    mv -f "$@" "$_dest/" || pk_die 1 "cannot restore the originals into $_dest"
    for _i in $_ids; do pk_out "restored $_i original"; done
  done
  if [ -n "$_rm" ]; then
    set --
    for _i in $_rm; do pk_get pk_mp "$_i"; set -- "$@" "$_v"; done
    rm -f "$@" || pk_die 1 "cannot remove the created files"
    for _i in $_rm; do pk_out "restored $_i removed"; done
  fi
  pk_drop_bytecode
  pk_undo_mkdirs
  rm -rf .patchkit/orig .patchkit/stage .patchkit/manifest .patchkit/mkdirs || pk_die 1 "cannot clean $PK_ROOT/.patchkit"
  printf '%s %s reverted %s\n' "$(date +%s)" "$PK_OP" "${PK_M_SERIES:-?}" >> .patchkit/journal 2>/dev/null || :
}

# -- no trace: what apply adds besides the files (directories, the exclude line) is taken out -----
pk_note_mkdirs() {  # dir: record the directories a commit is about to create (outermost first)
  _nd=$1; _new=
  while [ ! -d "$_nd" ] && [ "$_nd" != . ]; do
    _new="$_nd$PK_NL$_new"
    case $_nd in */*) _nd=${_nd%/*} ;; *) _nd=. ;; esac
  done
  printf '%s' "$_new" >> .patchkit/mkdirs
}

pk_undo_mkdirs() {  # remove the directories apply created, innermost first, where they are empty
  [ -f .patchkit/mkdirs ] || return 0
  _mk=$(sed -n '1!G;h;$p' .patchkit/mkdirs) || return 0
  _oifs=$IFS; IFS=$PK_NL
  # shellcheck disable=SC2086
  set -- $_mk
  IFS=$_oifs
  [ $# -gt 0 ] && rmdir "$@" 2>/dev/null
  :
}

pk_exclude_add() {  # a git checkout: keep .patchkit out of git status, and remember how
  # The new exclude file is made beside, its sha256 recorded, then renamed into place: a kill
  # at any instant leaves the original or the recorded result, nothing in between.
  [ -d .git ] || return 0
  pk_exclude_undo                                 # an earlier apply's (kept or half-done): afresh
  _x=.git/info/exclude; _new=.patchkit/exclude.new
  if [ -f "$_x" ]; then
    _how=appended; _have=; _l=
    while IFS= read -r _l; do [ "$_l" = "/.patchkit/" ] && _have=1; done < "$_x"
    _nl=1; if [ -n "$_l" ]; then _nl=0; [ "$_l" = "/.patchkit/" ] && _have=1; fi   # no final newline
    [ -n "$_have" ] && return 0                   # the user's own line: never touched
    cp -p "$_x" .patchkit/exclude.orig 2>/dev/null && cp -p "$_x" "$_new" 2>/dev/null || return 0
    { [ "$_nl" = 1 ] || printf '\n'; printf '/.patchkit/\n'; } >> "$_new" || return 0
  else
    _how=created-file; [ -d .git/info ] || _how=created-dir
    printf '/.patchkit/\n' > "$_new" || return 0
  fi
  _xh=$($PK_SHA "$_new" 2>/dev/null) || return 0
  printf '%s %s\n' "$_how" "${_xh%%[ 	]*}" > .patchkit/exclude || return 0
  [ "$_how" = created-dir ] && { mkdir .git/info 2>/dev/null || return 0; }
  mv -f "$_new" "$_x" 2>/dev/null || :
}

pk_exclude_undo() {  # put .git/info/exclude back as it was before apply added our line
  # no record: apply stopped before it, and so before touching the exclude file
  if [ ! -f .patchkit/exclude ]; then
    { [ -e .patchkit/exclude.orig ] || [ -e .patchkit/exclude.new ]; } && rm -f .patchkit/exclude.orig .patchkit/exclude.new
    return 0
  fi
  read -r _how _xh < .patchkit/exclude
  _x=.git/info/exclude
  if [ -f "$_x" ]; then
    _hs=$($PK_SHA "$_x" $([ -f .patchkit/exclude.orig ] && echo .patchkit/exclude.orig) 2>/dev/null) || _hs=
    # shellcheck disable=SC2086
    set -- $_hs -
    if [ "$1" = "$_xh" ]; then                    # as apply left it: back to the very bytes
      case $_how in
        appended) mv -f .patchkit/exclude.orig "$_x" ;;
        *) rm -f "$_x" ;;
      esac
    elif [ "$1" = "${3:--}" ]; then :             # apply stopped before the rename
    else                                          # edited since: take out our line only
      sed '/^\/\.patchkit\/$/d' "$_x" > .patchkit/exclude.new && mv -f .patchkit/exclude.new "$_x"
      pk_out "warn .git/info/exclude changed after apply; only the /.patchkit/ line was removed"
    fi
  fi
  [ "$_how" = created-dir ] && rmdir .git/info 2>/dev/null
  rm -f .patchkit/exclude .patchkit/exclude.orig .patchkit/exclude.new
}

pk_pycache() {  # path -> _pyd (its __pycache__ directory), _stem; 1 when path is not a .py file
  case $1 in *.py) ;; *) return 1 ;; esac
  _pyd=${1%/*}; [ "$_pyd" = "$1" ] && _pyd=.; _pyd=$_pyd/__pycache__
  _stem=${1##*/}; _stem=${_stem%.py}
  [ -d "$_pyd" ] && command -v find >/dev/null 2>&1
}

pk_drop_bytecode() {  # revert: the bytecode Python compiled from the patched or created files
  # Compiled after the commit, so newer than the manifest it wrote; bytecode of the originals
  # that was there before apply is older, stays, and is valid again once they are back.
  [ -f .patchkit/manifest ] || return 0
  _i=1
  while [ "$_i" -le "$PK_MN" ]; do
    pk_get pk_mp "$_i"
    if pk_pycache "$_v"; then
      find "$_pyd" -type f -name "$_stem.*.pyc" -newer .patchkit/manifest 2>/dev/null |
        while IFS= read -r _c; do rm -f "$_c" && pk_out "bytecode $_c"; done
      if [ -d ".patchkit/orig/pyc/$_i" ]; then     # the originals' bytecode Python replaced
        find ".patchkit/orig/pyc/$_i" -type f 2>/dev/null | while IFS= read -r _c; do
          [ -e "$_pyd/${_c##*/}" ] || mv -f "$_c" "$_pyd/" || :
        done
      fi
      rmdir "$_pyd" 2>/dev/null || :       # only when it is empty now
    fi
    _i=$((_i + 1))
  done
}

pk_save_bytecode() {  # apply: keep the originals' bytecode, which Python replaces once the patched
  _k=1                # files are imported; revert puts it back (pk_drop_bytecode)
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_p "$_k"
    if pk_pycache "$_v"; then
      _pyl=$(find "$_pyd" -type f -name "$_stem.*.pyc" 2>/dev/null)
      if [ -n "$_pyl" ]; then
        mkdir -p ".patchkit/orig/pyc/$_k" || pk_die 1 "cannot save bytecode under $PK_ROOT/.patchkit (disk full?)"
        printf '%s\n' "$_pyl" | while IFS= read -r _c; do
          ln -f "$_c" ".patchkit/orig/pyc/$_k/" 2>/dev/null || cp -p "$_c" ".patchkit/orig/pyc/$_k/" || :
        done
      fi
    fi
    _k=$((_k + 1))
  done
}

pk_leftovers() {  # status on a tree without patchkit state: what an earlier run left behind
  [ -d .patchkit/trash ] && pk_out "leftover trash .patchkit/trash"
  _k=1
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_kind "$_k"; _kind=$_v; pk_get pk_p "$_k"; _p=$_v
    if [ "$_kind" = create ] && [ ! -e "$_p" ] && pk_pycache "$_p"; then
      find "$_pyd" -type f -name "$_stem.*.pyc" 2>/dev/null |
        while IFS= read -r _c; do pk_out "leftover bytecode $_c"; done
    fi
    _k=$((_k + 1))
  done
}

pk_revert_tidy() {  # a revert that succeeded: journal into the answer, then no patchkit trace
  rm -rf .patchkit/stage .patchkit/orig .patchkit/manifest.tmp .patchkit/mkdirs
  if [ -f .patchkit/journal ]; then
    while IFS= read -r _jl; do pk_out "journal $_jl"; done < .patchkit/journal
    if [ "${PK_KEEP_JOURNAL:-0}" = 1 ]; then pk_out "journal-kept"; else rm -f .patchkit/journal; fi
  fi
  # trash (files a forced revert moved aside), a kept journal or anyone else's state stays
  pk_state_empty lock exclude exclude.orig exclude.new && pk_exclude_undo
  :
}

pk_backup() {  # _ dir-index files...: hard-link originals into .patchkit/orig/<dir>/ (copy where links are impossible)
  _d=$2; shift 2
  ln -f "$@" ".patchkit/orig/$_d/" 2>/dev/null || cp -p "$@" ".patchkit/orig/$_d/" \
    || pk_die 1 "cannot save the originals of $* (disk full?)"
}

pk_commit_dir() {  # kind dir-index: rename the dir's staged files over its originals, one mv
  pk_get "pk_G$1" "$2"; set --
  for _ck in $_v; do pk_staged_path .patchkit/stage "$_ck"; set -- "$@" "$_sp"; done
  pk_get pk_p "$_ck"; _dest=${_v%/*}; [ "$_dest" = "$_v" ] && _dest=.
  if [ -d "$_dest" ] || { pk_note_mkdirs "$_dest" && mkdir -p "$_dest"; }; then
    mv -f "$@" "$_dest/" && return 0
  fi
  PK_COMMIT_FAILED=$_dest
  return 1
}

pk_commit_rollback() {  # a rename failed half-way: put back every file already committed
  pk_out "commit failed in $PK_ROOT/$PK_COMMIT_FAILED; rolling back"
  pk_manifest_read
  pk_manifest_state
  pk_restore 0
  pk_out "rolled back"
  pk_die 1 "commit failed in $PK_ROOT/$PK_COMMIT_FAILED (read-only file system, permission denied or disk full); every file was put back"
}

pk_commit() {
  pk_manifest_write committing
  for _gdi in $PK_GDIRS; do pk_get pk_Gm "$_gdi"; [ -z "$_v" ] || pk_commit_dir m "$_gdi" || pk_commit_rollback; done
  for _gdi in $PK_GDIRS; do pk_get pk_Gc "$_gdi"; [ -z "$_v" ] || pk_commit_dir c "$_gdi" || pk_commit_rollback; done
  _k=1; _al=
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_kind "$_k"; [ "$_v" = delete ] && { pk_get pk_p "$_k"; _al="$_al$PK_NL$_v"; }
    _k=$((_k + 1))
  done
  _oifs=$IFS; IFS=$PK_NL; set -- $_al; IFS=$_oifs
  if [ $# -gt 0 ]; then rm -f "$@" || { PK_COMMIT_FAILED=$1; pk_commit_rollback; }; fi
  pk_manifest_write applied
  rm -rf .patchkit/stage
  pk_exclude_add
  _k=1
  while [ "$_k" -le "$PK_N" ]; do pk_out "wrote $_k"; _k=$((_k + 1)); done
}

# -- operations ------------------------------------------------------------------------------------
pk_pin_checks() {  # commit (checkout layout) and dist-info version (installed layout)
  if [ "$PK_LAYOUT" = checkout ] && [ -n "${PK_COMMIT:-}" ]; then pk_git_check "$PK_COMMIT"; fi
  if [ "$PK_LAYOUT" = installed ] && [ -n "${PK_VERSION:-}" ]; then pk_version_check "$PK_DIST" "$PK_VERSION"; fi
}

pk_applied_already() {  # 0 when the manifest says this very series is applied and every file agrees
  [ "$PK_M" = 1 ] && [ "${PK_M_DIGEST:-}" = "$PK_DIGEST" ] && [ "${PK_M_STATE:-}" = applied ] || return 1
  pk_manifest_state
  _i=1
  while [ "$_i" -le "$PK_MN" ]; do pk_get pk_mst "$_i"; [ "$_v" = applied ] || return 1; _i=$((_i + 1)); done
  return 0
}

pk_checked_files() {  # check and verify: every file checked, with-hunks (1/0); exits if applied or drifted
  pk_layout "$PK_WANT_LAYOUT"; pk_pin_checks
  pk_manifest_read
  if pk_applied_already; then pk_out "already applied"; exit 0; fi
  if [ "$PK_M" = 1 ]; then
    # patchkit state: each file in the manifest's words (as status says them); unless every file
    # is its original again (an interrupted operation's leftovers), nothing to compare with the pin
    [ "${PK_MSTATED:-0}" = 1 ] || pk_manifest_state
    _i=1
    while [ "$_i" -le "$PK_MN" ]; do pk_get pk_mst "$_i"; [ "$_v" = original ] || exit 1; _i=$((_i + 1)); done
  fi
  pk_check_files "$1"
  [ "$PK_DRIFT" = 0 ] && [ "$PK_REFUSE" = 0 ] || exit 1
}

pk_run_check() {
  pk_checked_files 0
  exit 0
}

pk_run_verify() {
  pk_checked_files 1
  pk_stage "$PK_T/stage" 0
  [ "$PK_BADSTAGE" = 0 ] || exit 1
  pk_writable_dirs verify         # a gate that passes must mean apply would pass
  [ "$PK_REFUSE" = 0 ] || exit 1
  exit 0
}

pk_run_apply() {  # PK_PHASE: all | stage (fleet phase 1)
  pk_lock
  pk_layout "$PK_WANT_LAYOUT"; pk_pin_checks
  pk_manifest_read
  if [ "$PK_M" = 1 ]; then
    if [ "${PK_M_DIGEST:-}" != "$PK_DIGEST" ]; then
      pk_manifest_state
      pk_die 1 "target carries another version of a series (${PK_M_SERIES:-?} ${PK_M_DIGEST:-?}); revert it first"
    fi
    if pk_applied_already; then pk_out "already applied"; exit 0; fi
    # An interrupted apply or revert: put every original back, then apply afresh.
    pk_manifest_state
    if [ "$PK_MODIFIED" != 0 ] && [ "${PK_M_STATE:-}" = applied ]; then
      pk_die 1 "files were modified after apply (see patch.status); revert --force keeps them in .patchkit/trash and restores the originals"
    fi
    [ "$PK_MODIFIED" = 0 ] || pk_die 1 "an interrupted operation left files that match neither the original nor the patched text; see status, then revert --force"
    pk_hold
    pk_restore 0
    pk_out "recovered interrupted"
    pk_unhold
  fi
  rm -rf .patchkit/stage .patchkit/orig
  pk_check_files 1
  [ "$PK_DRIFT" = 0 ] && [ "$PK_REFUSE" = 0 ] || exit 1
  pk_writable_dirs
  [ -e .patchkit/journal ] || PK_JOURNAL_OURS=1   # an interrupted stage takes its own lines away
  PK_UNDO_STAGE=1
  pk_out "step stage"
  pk_stage .patchkit/stage 1
  if [ "$PK_BADSTAGE" != 0 ]; then rm -rf .patchkit/stage; exit 1; fi
  set --
  for _d in $PK_DIRS; do set -- "$@" ".patchkit/orig/$_d"; done
  mkdir -p "$@" || pk_die 1 "cannot create $PK_ROOT/.patchkit/orig (disk full?)"
  pk_by_dir m pk_backup ""
  pk_by_dir d pk_backup ""
  pk_save_bytecode
  pk_manifest_write staged
  if [ "${PK_PHASE:-all}" = stage ]; then PK_UNDO_STAGE=0; pk_out "staged ok"; exit 0; fi
  pk_hold                         # an interrupt from here on waits for the commit's end
  PK_UNDO_STAGE=0
  pk_commit
  exit 0
}

pk_run_commit() {  # fleet phase 2: commit what phase 1 staged and checked
  pk_lock
  pk_layout "$PK_WANT_LAYOUT"
  pk_manifest_read
  [ "$PK_M" = 1 ] && [ "${PK_M_DIGEST:-}" = "$PK_DIGEST" ] || pk_die 1 "nothing staged for this series"
  if pk_applied_already; then pk_out "already applied"; exit 0; fi
  [ "${PK_M_STATE:-}" = staged ] || pk_die 1 "manifest state is ${PK_M_STATE:-?}, not staged"
  pk_hold
  _i=1
  while [ "$_i" -le "$PK_MN" ]; do
    eval "pk_post_$_i=\${pk_mpost_$_i}"
    _i=$((_i + 1))
  done
  pk_commit
  exit 0
}

pk_run_unstage() {  # fleet abort before commit: drop the staged files and saved originals
  pk_lock
  pk_manifest_read
  if [ "$PK_M" = 1 ] && [ "${PK_M_STATE:-}" = staged ] && [ "${PK_M_DIGEST:-}" = "$PK_DIGEST" ]; then
    pk_hold
    rm -rf .patchkit/stage .patchkit/orig .patchkit/manifest || pk_die 1 "cannot clean $PK_ROOT/.patchkit"
    pk_out "unstaged"
    printf '%s %s unstaged %s\n' "$(date +%s)" "$PK_OP" "$PK_SERIES" >> .patchkit/journal 2>/dev/null || :
    pk_revert_tidy
  fi
  exit 0
}

pk_run_revert() {
  if [ ! -e .patchkit ] && [ ! -L .patchkit ]; then
    # no patchkit state at all: nothing to lock or write (a read-only tree says so too)
    pk_layout "$PK_WANT_LAYOUT"
    pk_check_files 0
    pk_out "nothing to revert"
    [ "$PK_DRIFT" = 0 ] || exit 1
    exit 0
  fi
  pk_lock
  pk_manifest_read
  if [ "$PK_M" = 0 ]; then
    pk_layout "$PK_WANT_LAYOUT"
    pk_check_files 0
    pk_out "nothing to revert"
    [ "$PK_DRIFT" = 0 ] || exit 1
    pk_hold
    pk_revert_tidy
    exit 0
  fi
  pk_manifest_state
  if [ "$PK_MODIFIED" = 1 ] && [ "${PK_FORCE:-0}" != 1 ]; then
    pk_die 1 "files were modified after apply; revert refused (use --force to discard the changes)"
  fi
  pk_hold                         # an interrupt from here on waits for the originals to be back
  pk_restore "${PK_FORCE:-0}"
  pk_revert_tidy
  exit 0
}

pk_run_status() {
  if [ -e .patchkit/lock ]; then pk_lock_report; fi
  [ -d .patchkit/stage ] && pk_out "leftover stage"
  pk_manifest_read
  [ "$PK_M" = 1 ] && pk_manifest_state
  ( pk_layout "$PK_WANT_LAYOUT" && pk_pin_checks && pk_check_files 0 ) || :
  [ "$PK_M" = 1 ] || ( pk_layout "$PK_WANT_LAYOUT" >/dev/null && pk_leftovers ) || :
  exit 0
}

pk_run_unlock() {  # by hand, for a lock no one can prove dead (another host, no owner recorded)
  pk_state_safe
  if [ -e .patchkit/lock ]; then
    pk_lock_report
    rm -rf .patchkit/lock .patchkit/lock.break || pk_die 1 "cannot remove the lock"
    pk_out "unlocked"
    pk_state_empty && rmdir .patchkit 2>/dev/null
  fi
  exit 0
}
