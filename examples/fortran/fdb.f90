! FDB5's C API (fdb5/api/fdb_c.h, upstream's current ABI) for Fortran through iso_c_binding, the
! way forecast models call FDB: opaque handles are type(c_ptr), strings go in NUL-terminated and
! come back as C pointers. Works against FDB5's libfdb5.so and fieldstore's alike.
!
! The interfaces are the C functions one for one (every one returns an FDB_* code); the
! procedures after `contains` only convert strings and check codes.
module fdb
    use, intrinsic :: iso_c_binding
    use, intrinsic :: iso_fortran_env, only: error_unit
    implicit none
    private

    ! Return codes (enum FdbErrorValues).
    integer(c_int), parameter, public :: FDB_SUCCESS = 0
    integer(c_int), parameter, public :: FDB_ERROR_GENERAL_EXCEPTION = 1
    integer(c_int), parameter, public :: FDB_ERROR_UNKNOWN_EXCEPTION = 2
    integer(c_int), parameter, public :: FDB_ITERATION_COMPLETE = 3

    public :: fdb_initialise, fdb_version, fdb_vcs_version, fdb_error_string
    public :: fdb_new_handle, fdb_new_handle_from_yaml, fdb_delete_handle, fdb_flush
    public :: fdb_new_key, fdb_key_add, fdb_delete_key, fdb_archive, fdb_archive_multiple
    public :: fdb_new_request, fdb_request_add, fdb_expand_request, fdb_delete_request
    public :: fdb_list, fdb_listiterator_next, fdb_listiterator_attrs, fdb_listiterator_splitkey
    public :: fdb_delete_listiterator
    public :: fdb_new_splitkey, fdb_splitkey_next_metadata, fdb_delete_splitkey
    public :: fdb_new_datareader, fdb_retrieve, fdb_datareader_open, fdb_datareader_close
    public :: fdb_datareader_tell, fdb_datareader_seek, fdb_datareader_skip
    public :: fdb_datareader_size, fdb_datareader_read, fdb_delete_datareader
    public :: fdb_c_string, fdb_f_string, fdb_message, fdb_check
    public :: fdb_key_set, fdb_request_set

    interface
        integer(c_int) function fdb_initialise() bind(C, name="fdb_initialise")
            import :: c_int
        end function

        integer(c_int) function fdb_version(version) bind(C, name="fdb_version")
            import :: c_int, c_ptr
            type(c_ptr), intent(out) :: version
        end function

        integer(c_int) function fdb_vcs_version(sha1) bind(C, name="fdb_vcs_version")
            import :: c_int, c_ptr
            type(c_ptr), intent(out) :: sha1
        end function

        type(c_ptr) function fdb_error_string(err) bind(C, name="fdb_error_string")
            import :: c_int, c_ptr
            integer(c_int), value :: err
        end function

        ! Handles

        integer(c_int) function fdb_new_handle(fdb) bind(C, name="fdb_new_handle")
            import :: c_int, c_ptr
            type(c_ptr), intent(out) :: fdb
        end function

        integer(c_int) function fdb_new_handle_from_yaml(fdb, system_config, user_config) &
                bind(C, name="fdb_new_handle_from_yaml")
            import :: c_int, c_ptr, c_char
            type(c_ptr), intent(out) :: fdb
            character(kind=c_char), dimension(*), intent(in) :: system_config, user_config
        end function

        integer(c_int) function fdb_delete_handle(fdb) bind(C, name="fdb_delete_handle")
            import :: c_int, c_ptr
            type(c_ptr), value :: fdb
        end function

        integer(c_int) function fdb_flush(fdb) bind(C, name="fdb_flush")
            import :: c_int, c_ptr
            type(c_ptr), value :: fdb
        end function

        ! Keys and archiving

        integer(c_int) function fdb_new_key(key) bind(C, name="fdb_new_key")
            import :: c_int, c_ptr
            type(c_ptr), intent(out) :: key
        end function

        integer(c_int) function fdb_key_add(key, param, value) bind(C, name="fdb_key_add")
            import :: c_int, c_ptr, c_char
            type(c_ptr), value :: key
            character(kind=c_char), dimension(*), intent(in) :: param, value
        end function

        integer(c_int) function fdb_delete_key(key) bind(C, name="fdb_delete_key")
            import :: c_int, c_ptr
            type(c_ptr), value :: key
        end function

        integer(c_int) function fdb_archive(fdb, key, data, length) bind(C, name="fdb_archive")
            import :: c_int, c_ptr, c_char, c_size_t
            type(c_ptr), value :: fdb, key
            character(kind=c_char), dimension(*), intent(in) :: data
            integer(c_size_t), value :: length
        end function

        ! req may be c_null_ptr.
        integer(c_int) function fdb_archive_multiple(fdb, req, data, length) &
                bind(C, name="fdb_archive_multiple")
            import :: c_int, c_ptr, c_char, c_size_t
            type(c_ptr), value :: fdb, req
            character(kind=c_char), dimension(*), intent(in) :: data
            integer(c_size_t), value :: length
        end function

        ! Requests

        integer(c_int) function fdb_new_request(req) bind(C, name="fdb_new_request")
            import :: c_int, c_ptr
            type(c_ptr), intent(out) :: req
        end function

        ! values: num_values pointers to NUL-terminated strings (see fdb_request_set).
        integer(c_int) function fdb_request_add(req, param, values, num_values) &
                bind(C, name="fdb_request_add")
            import :: c_int, c_ptr, c_char
            type(c_ptr), value :: req
            character(kind=c_char), dimension(*), intent(in) :: param
            type(c_ptr), dimension(*), intent(in) :: values
            integer(c_int), value :: num_values
        end function

        integer(c_int) function fdb_expand_request(req) bind(C, name="fdb_expand_request")
            import :: c_int, c_ptr
            type(c_ptr), value :: req
        end function

        integer(c_int) function fdb_delete_request(req) bind(C, name="fdb_delete_request")
            import :: c_int, c_ptr
            type(c_ptr), value :: req
        end function

        ! Listing

        integer(c_int) function fdb_list(fdb, req, it, duplicates, depth) bind(C, name="fdb_list")
            import :: c_int, c_ptr, c_bool
            type(c_ptr), value :: fdb, req
            type(c_ptr), intent(out) :: it
            logical(c_bool), value :: duplicates
            integer(c_int), value :: depth
        end function

        integer(c_int) function fdb_listiterator_next(it) bind(C, name="fdb_listiterator_next")
            import :: c_int, c_ptr
            type(c_ptr), value :: it
        end function

        integer(c_int) function fdb_listiterator_attrs(it, uri, off, length) &
                bind(C, name="fdb_listiterator_attrs")
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: it
            type(c_ptr), intent(out) :: uri
            integer(c_size_t), intent(out) :: off, length
        end function

        integer(c_int) function fdb_listiterator_splitkey(it, key) &
                bind(C, name="fdb_listiterator_splitkey")
            import :: c_int, c_ptr
            type(c_ptr), value :: it, key
        end function

        integer(c_int) function fdb_delete_listiterator(it) bind(C, name="fdb_delete_listiterator")
            import :: c_int, c_ptr
            type(c_ptr), value :: it
        end function

        integer(c_int) function fdb_new_splitkey(key) bind(C, name="fdb_new_splitkey")
            import :: c_int, c_ptr
            type(c_ptr), intent(out) :: key
        end function

        ! level: 0 database, 1 index, 2 datum.
        integer(c_int) function fdb_splitkey_next_metadata(it, key, value, level) &
                bind(C, name="fdb_splitkey_next_metadata")
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: it
            type(c_ptr), intent(out) :: key, value
            integer(c_size_t), intent(out) :: level
        end function

        integer(c_int) function fdb_delete_splitkey(key) bind(C, name="fdb_delete_splitkey")
            import :: c_int, c_ptr
            type(c_ptr), value :: key
        end function

        ! Retrieving

        integer(c_int) function fdb_new_datareader(dr) bind(C, name="fdb_new_datareader")
            import :: c_int, c_ptr
            type(c_ptr), intent(out) :: dr
        end function

        integer(c_int) function fdb_retrieve(fdb, req, dr) bind(C, name="fdb_retrieve")
            import :: c_int, c_ptr
            type(c_ptr), value :: fdb, req, dr
        end function

        integer(c_int) function fdb_datareader_open(dr, size) bind(C, name="fdb_datareader_open")
            import :: c_int, c_ptr, c_long
            type(c_ptr), value :: dr
            integer(c_long), intent(out) :: size
        end function

        integer(c_int) function fdb_datareader_close(dr) bind(C, name="fdb_datareader_close")
            import :: c_int, c_ptr
            type(c_ptr), value :: dr
        end function

        integer(c_int) function fdb_datareader_tell(dr, pos) bind(C, name="fdb_datareader_tell")
            import :: c_int, c_ptr, c_long
            type(c_ptr), value :: dr
            integer(c_long), intent(out) :: pos
        end function

        integer(c_int) function fdb_datareader_seek(dr, pos) bind(C, name="fdb_datareader_seek")
            import :: c_int, c_ptr, c_long
            type(c_ptr), value :: dr
            integer(c_long), value :: pos
        end function

        integer(c_int) function fdb_datareader_skip(dr, count) bind(C, name="fdb_datareader_skip")
            import :: c_int, c_ptr, c_long
            type(c_ptr), value :: dr
            integer(c_long), value :: count
        end function

        integer(c_int) function fdb_datareader_size(dr, size) bind(C, name="fdb_datareader_size")
            import :: c_int, c_ptr, c_long
            type(c_ptr), value :: dr
            integer(c_long), intent(out) :: size
        end function

        integer(c_int) function fdb_datareader_read(dr, buf, count, nread) &
                bind(C, name="fdb_datareader_read")
            import :: c_int, c_ptr, c_long, c_char
            type(c_ptr), value :: dr
            character(kind=c_char), dimension(*), intent(out) :: buf
            integer(c_long), value :: count
            integer(c_long), intent(out) :: nread
        end function

        integer(c_int) function fdb_delete_datareader(dr) bind(C, name="fdb_delete_datareader")
            import :: c_int, c_ptr
            type(c_ptr), value :: dr
        end function

        ! libc, to measure the strings the library returns.
        integer(c_size_t) function c_strlen(s) bind(C, name="strlen")
            import :: c_size_t, c_ptr
            type(c_ptr), value :: s
        end function
    end interface

contains

    ! A Fortran string (trailing blanks dropped) as the NUL-terminated string C expects.
    function fdb_c_string(s) result(c)
        character(len=*), intent(in) :: s
        character(kind=c_char, len=len_trim(s) + 1) :: c
        c = trim(s)//c_null_char
    end function

    ! A NUL-terminated string the library returned (owned by the library) as a Fortran string.
    function fdb_f_string(p) result(s)
        type(c_ptr), intent(in) :: p
        character(len=:), allocatable :: s
        character(kind=c_char), pointer :: chars(:)
        integer :: n, i
        if (.not. c_associated(p)) then
            s = ""
            return
        end if
        n = int(c_strlen(p))
        call c_f_pointer(p, chars, [n])
        allocate (character(len=n) :: s)
        do i = 1, n
            s(i:i) = chars(i)
        end do
    end function

    ! The library's message for the last failure in this thread.
    function fdb_message(rc) result(s)
        integer(c_int), intent(in) :: rc
        character(len=:), allocatable :: s
        s = fdb_f_string(fdb_error_string(rc))
    end function

    ! Stops the program with the library's message when rc is not FDB_SUCCESS, naming `what`.
    subroutine fdb_check(rc, what)
        integer(c_int), intent(in) :: rc
        character(len=*), intent(in) :: what
        if (rc /= FDB_SUCCESS) then
            write (error_unit, '(a, a, i0, a, a)') what, " failed (", rc, "): ", fdb_message(rc)
            error stop 1
        end if
    end subroutine

    ! fdb_key_add with Fortran strings.
    integer(c_int) function fdb_key_set(key, param, value) result(rc)
        type(c_ptr), intent(in) :: key
        character(len=*), intent(in) :: param, value
        rc = fdb_key_add(key, fdb_c_string(param), fdb_c_string(value))
    end function

    ! fdb_request_add with Fortran strings: `values` become the NUL-terminated array C expects,
    ! held here only for the call (the library copies them).
    integer(c_int) function fdb_request_set(req, param, values) result(rc)
        type(c_ptr), intent(in) :: req
        character(len=*), intent(in) :: param
        character(len=*), intent(in) :: values(:)
        character(kind=c_char), allocatable, target :: buf(:, :)
        type(c_ptr), allocatable :: ptrs(:)
        integer :: i, j, n
        n = 0
        do i = 1, size(values)
            n = max(n, len_trim(values(i)))
        end do
        allocate (buf(n + 1, size(values)), ptrs(size(values)))
        buf = c_null_char
        do i = 1, size(values)
            do j = 1, len_trim(values(i))
                buf(j, i) = values(i)(j:j)
            end do
            ptrs(i) = c_loc(buf(1, i))
        end do
        rc = fdb_request_add(req, fdb_c_string(param), ptrs, int(size(values), c_int))
    end function

end module fdb
