! Archives GRIB fields with their keys through FDB5's C API, lists them and retrieves each one,
! checking the bytes come back unchanged: what a model's output server does, in miniature.
!
! Usage: archive_list_retrieve ROOT GRIB
!   ROOT  an existing directory for a new store (the config is made here, as YAML)
!   GRIB  GRIB messages of param 130 (t) on 850 hPa at steps 0, 6, 12..., in step order, e.g.
!         fieldstore sample --out t850.grib --params t --levels 850 --steps 0/6/12
! Exits 0 after printing OK; on any failure prints the library's message and exits 1.
program archive_list_retrieve
    use, intrinsic :: iso_c_binding
    use, intrinsic :: iso_fortran_env, only: error_unit
    use fdb
    implicit none

    character(len=4096) :: root, path
    character(kind=c_char), allocatable :: grib(:)
    integer, allocatable :: starts(:), lengths(:)
    character(len=8), allocatable :: steps(:)
    type(c_ptr) :: handle, key, req, it, split, reader, str
    character(len=:), allocatable :: config, listed_step
    integer(c_size_t) :: off, length, level
    integer(c_long) :: nbytes, nread
    character(kind=c_char), allocatable :: buf(:)
    integer(c_int) :: rc
    integer :: nfields, i, n
    type(c_ptr) :: k, v

    if (command_argument_count() /= 2) then
        write (error_unit, '(a)') "usage: archive_list_retrieve ROOT GRIB"
        error stop 2
    end if
    call get_command_argument(1, root)
    call get_command_argument(2, path)

    call fdb_check(fdb_initialise(), "fdb_initialise")
    call fdb_check(fdb_version(str), "fdb_version")
    config = fdb_f_string(str)
    call fdb_check(fdb_vcs_version(str), "fdb_vcs_version")
    print '(a, a, a, a, a)', "library: FDB5 API ", config, " (", fdb_f_string(str), ")"

    call read_messages(trim(path), grib, starts, lengths)
    nfields = size(starts)
    allocate (steps(nfields))
    do i = 1, nfields
        write (steps(i), '(i0)') 6*(i - 1)
    end do

    config = "type: local"//new_line("a")//"engine: toc"//new_line("a")// &
             "spaces:"//new_line("a")//"  - roots:"//new_line("a")// &
             "      - path: "//trim(root)//new_line("a")
    call fdb_check(fdb_new_handle_from_yaml(handle, fdb_c_string(config), fdb_c_string("")), &
                   "fdb_new_handle_from_yaml")

    ! Archive: one key per field, as a model knows what it writes.
    do i = 1, nfields
        call fdb_check(fdb_new_key(key), "fdb_new_key")
        call add(key, "class", "od")
        call add(key, "expver", "0001")
        call add(key, "stream", "oper")
        call add(key, "date", "20261122")
        call add(key, "time", "1200")
        call add(key, "type", "fc")
        call add(key, "levtype", "pl")
        call add(key, "levelist", "850")
        call add(key, "param", "130")
        call add(key, "step", trim(steps(i)))
        call fdb_check(fdb_archive(handle, key, grib(starts(i):), int(lengths(i), c_size_t)), &
                       "fdb_archive")
        call fdb_check(fdb_delete_key(key), "fdb_delete_key")
    end do
    call fdb_check(fdb_flush(handle), "fdb_flush")
    print '(a, i0, a)', "archived ", nfields, " fields"

    ! List: every field, its step from the split key and its length from the attributes.
    req = request(steps)
    call fdb_check(fdb_list(handle, req, it, .false._c_bool, 3_c_int), "fdb_list")
    call fdb_check(fdb_new_splitkey(split), "fdb_new_splitkey")
    n = 0
    do
        rc = fdb_listiterator_next(it)
        if (rc == FDB_ITERATION_COMPLETE) exit
        call fdb_check(rc, "fdb_listiterator_next")
        n = n + 1
        call fdb_check(fdb_listiterator_attrs(it, str, off, length), "fdb_listiterator_attrs")
        call fdb_check(fdb_listiterator_splitkey(it, split), "fdb_listiterator_splitkey")
        listed_step = ""
        do
            rc = fdb_splitkey_next_metadata(split, k, v, level)
            if (rc == FDB_ITERATION_COMPLETE) exit
            call fdb_check(rc, "fdb_splitkey_next_metadata")
            if (fdb_f_string(k) == "step") listed_step = fdb_f_string(v)
        end do
        i = index_of(steps, listed_step)
        if (i == 0) call fail("listed a field at step "//listed_step//" that was not archived")
        if (length /= int(lengths(i), c_size_t)) call fail("listed length differs from the archived one")
        print '(a, a, a, i0, a, a)', "listed step=", listed_step, " length=", length, " ", &
            fdb_f_string(str)
    end do
    if (n /= nfields) call fail("did not list every archived field")
    call fdb_check(fdb_delete_splitkey(split), "fdb_delete_splitkey")
    call fdb_check(fdb_delete_listiterator(it), "fdb_delete_listiterator")
    call fdb_check(fdb_delete_request(req), "fdb_delete_request")

    ! Retrieve each field on its own and compare with what was archived.
    do i = 1, nfields
        req = request(steps(i:i))
        call fdb_check(fdb_new_datareader(reader), "fdb_new_datareader")
        call fdb_check(fdb_retrieve(handle, req, reader), "fdb_retrieve")
        call fdb_check(fdb_datareader_open(reader, nbytes), "fdb_datareader_open")
        if (nbytes /= lengths(i)) call fail("retrieved size differs from the archived one")
        allocate (buf(nbytes))
        call fdb_check(fdb_datareader_read(reader, buf, nbytes, nread), "fdb_datareader_read")
        if (nread /= nbytes) call fail("short read")
        if (any(buf /= grib(starts(i):starts(i) + lengths(i) - 1))) call fail("retrieved bytes differ")
        deallocate (buf)
        call fdb_check(fdb_datareader_close(reader), "fdb_datareader_close")
        call fdb_check(fdb_delete_datareader(reader), "fdb_delete_datareader")
        call fdb_check(fdb_delete_request(req), "fdb_delete_request")
        print '(a, a, a, i0, a)', "retrieved step=", trim(steps(i)), ": ", nread, " bytes, as archived"
    end do

    ! A failing call returns a code; the message says why.
    call fdb_check(fdb_new_key(key), "fdb_new_key")
    call add(key, "class", "od")
    rc = fdb_archive(handle, key, grib, int(lengths(1), c_size_t))
    if (rc /= FDB_ERROR_GENERAL_EXCEPTION) call fail("an incomplete key was archived")
    print '(a, a)', "incomplete key refused: ", fdb_message(rc)
    call fdb_check(fdb_delete_key(key), "fdb_delete_key")

    call fdb_check(fdb_delete_handle(handle), "fdb_delete_handle")
    print '(a)', "OK"

contains

    subroutine add(key, param, value)
        type(c_ptr), intent(in) :: key
        character(len=*), intent(in) :: param, value
        call fdb_check(fdb_key_set(key, param, value), "fdb_key_add "//param)
    end subroutine

    ! The request for the archived fields at the given steps.
    type(c_ptr) function request(at_steps) result(r)
        character(len=*), intent(in) :: at_steps(:)
        call fdb_check(fdb_new_request(r), "fdb_new_request")
        call fdb_check(fdb_request_set(r, "class", ["od"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "expver", ["0001"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "stream", ["oper"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "date", ["20261122"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "time", ["1200"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "type", ["fc"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "levtype", ["pl"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "levelist", ["850"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "param", ["130"]), "fdb_request_add")
        call fdb_check(fdb_request_set(r, "step", at_steps), "fdb_request_add")
    end function

    integer function index_of(list, s)
        character(len=*), intent(in) :: list(:), s
        do index_of = 1, size(list)
            if (trim(list(index_of)) == s) return
        end do
        index_of = 0
    end function

    subroutine fail(why)
        character(len=*), intent(in) :: why
        write (error_unit, '(a)') "archive_list_retrieve: "//why
        error stop 1
    end subroutine

    ! Reads a file of GRIB messages and where each starts, by the total length in section 0
    ! (bytes 5-7 in GRIB 1, 9-16 in GRIB 2, big-endian).
    subroutine read_messages(file, bytes, first, lens)
        character(len=*), intent(in) :: file
        character(kind=c_char), allocatable, intent(out) :: bytes(:)
        integer, allocatable, intent(out) :: first(:), lens(:)
        integer :: unit, fsize, pos, total, j, count
        integer, allocatable :: tmp_first(:), tmp_lens(:)
        open (newunit=unit, file=file, access="stream", form="unformatted", action="read", &
              status="old")
        inquire (unit=unit, size=fsize)
        allocate (bytes(fsize), tmp_first(fsize/16 + 1), tmp_lens(fsize/16 + 1))
        read (unit) bytes
        close (unit)
        pos = 1
        count = 0
        do while (pos <= fsize)
            if (pos + 15 > fsize) call fail("trailing bytes after the last GRIB message")
            if (any(bytes(pos:pos + 3) /= ["G", "R", "I", "B"])) call fail("not a GRIB message")
            total = 0
            if (ichar(bytes(pos + 7)) == 1) then
                do j = 4, 6
                    total = total*256 + iand(ichar(bytes(pos + j)), 255)
                end do
            else
                do j = 8, 15
                    total = total*256 + iand(ichar(bytes(pos + j)), 255)
                end do
            end if
            if (total < 16 .or. pos + total - 1 > fsize) call fail("truncated GRIB message")
            count = count + 1
            tmp_first(count) = pos
            tmp_lens(count) = total
            pos = pos + total
        end do
        if (count == 0) call fail("no GRIB message in "//file)
        first = tmp_first(1:count)
        lens = tmp_lens(1:count)
    end subroutine

end program archive_list_retrieve
