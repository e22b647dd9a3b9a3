# bash completion for tensorfs (make install puts it in
# $(PREFIX)/share/bash-completion/completions/tensorfs).
# The options, -o keys, their values and the formats are read from
# `tensorfs --help` the first time, so they never disagree with the binary
# (tests/integration/test_system.py checks that they are exactly its own).

_tensorfs_help_cache=

_tensorfs_help()
{
	[ -n "$_tensorfs_help_cache" ] || _tensorfs_help_cache=$("${1:-tensorfs}" --help 2>/dev/null)
	printf '%s\n' "$_tensorfs_help_cache"
}

# Every -o key, with '=' when it takes a value: the name column of the
# lines after "-o opt[,opt...]" ("uid=N, gid=N" names two keys).
_tensorfs_okeys()
{
	_tensorfs_help "$1" | sed -n '/^    -o /,$p' |
		sed -n 's/^       \([a-z_][^ ]*\(, [^ ]*\)*\)  .*/\1/p' | tr ',' '\n' |
		sed -n 's/^ *\([a-z_][a-z_]*\)\(=\{0,1\}\).*/\1\2/p' | sort -u
}

# Every option that starts with a dash: those of the usage lines and of
# the lines of the options list that start with one.
_tensorfs_dashed()
{
	_tensorfs_help "$1" | sed -n -e '/^usage:/,/^$/p' -e '/^    -/p' |
		grep -o -- '\(^\|[[:space:],[]\)--*[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^[[:space:],[]*//' | sort -u
}

# The values a key takes, when --help lists them (layout=flat|tree).
_tensorfs_ovalues()
{
	local key=$1 bin=$2 line
	line=$(_tensorfs_help "$bin" | sed -n "s/^       $key=\([^ ]*\).*/\1/p" | head -1)
	case $key in
	input) _tensorfs_help "$bin" | sed -n 's/.*Formats: \(.*\)\./\1/p' | tr -d ',' ;;
	proxy) echo "http:// https://" ;;
	*) case $line in *'|'*) echo "${line//|/ }" ;; esac ;;
	esac
}

_tensorfs()
{
	local cur prev bin
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	bin=${COMP_WORDS[0]}
	COMPREPLY=()
	if [ "$prev" = "-o" ]; then
		# the part after the last comma: KEY, or KEY=VALUE
		local head= part=$cur
		case $cur in *,*) head=${cur%,*},; part=${cur##*,} ;; esac
		case $part in
		*=*)
			local key=${part%%=*} val=${part#*=} vals
			vals=$(_tensorfs_ovalues "$key" "$bin")
			if [ -n "$vals" ]; then
				COMPREPLY=($(compgen -P "$head$key=" -W "$vals" -- "$val"))
			else
				# a path (edits=FILE, cache_dir=DIR) or a number
				COMPREPLY=($(compgen -P "$head$key=" -f -- "$val"))
			fi
			;;
		*)
			COMPREPLY=($(compgen -P "$head" -W "$(_tensorfs_okeys "$bin")" -- "$part"))
			;;
		esac
		# no space after KEY= or after a value the list may go on from
		compopt -o nospace 2>/dev/null
		return
	fi
	case $cur in
	-*)
		COMPREPLY=($(compgen -W "$(_tensorfs_dashed "$bin")" -- "$cur"))
		return
		;;
	esac
	if [ "$COMP_CWORD" -eq 1 ] && [[ "diff" == "$cur"* ]] && [ -n "$cur" ]; then
		COMPREPLY=(diff)
	fi
	# SOURCE and MOUNTPOINT: local paths
	COMPREPLY+=($(compgen -f -- "$cur"))
	compopt -o filenames 2>/dev/null
}

complete -F _tensorfs tensorfs
